"""Small helpers PopRT scripts import from `poprt.utils` (ported as `compiler.utils`)."""
import logging
from typing import Optional, Union

_LOGGER_NAME = "compiler"


def get_logger(name: Optional[str] = None, level: Union[int, str, None] = None) -> logging.Logger:
    """The compiler's logger (or a child of it). Messages go to stderr once a level is set,
    so library use stays silent by default while scripts can turn logging on."""
    logger = logging.getLogger(_LOGGER_NAME if not name else f"{_LOGGER_NAME}.{name}")
    root = logging.getLogger(_LOGGER_NAME)
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[%(levelname)s] %(name)s: %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.WARNING)
        root.propagate = False
    if level is not None:
        logger.setLevel(level.upper() if isinstance(level, str) else level)
    return logger
