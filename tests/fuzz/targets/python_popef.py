"""Fuzz target: the Python PopEF reader (popef.reader) and popef_dump (popef.dump), which must
refuse any input they cannot show with a PopefError naming the problem."""
import json

from popef import dump
from popef.format import PopefError
from popef.reader import PopefFile

import seeds


def check(data: bytes) -> None:
    try:
        popef = PopefFile(data, "<fuzz>")
    except PopefError:
        return
    for read in (lambda: popef.metadata, lambda: popef.executable, popef.tensor_data,
                 lambda: [popef.opaque_json(name) for name in popef.opaques]):
        try:
            read()
        except PopefError:
            pass
    try:
        doc = dump.describe(popef)
    except PopefError:
        return
    dump.render_text(doc)
    json.dumps(doc)


def seed_inputs():
    return list(seeds.popef_seeds().values())
