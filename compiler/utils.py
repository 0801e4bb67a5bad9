"""Small helpers PopRT scripts import (`from poprt.utils import get_logger`)."""
import logging
import os

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def get_logger(name: str = "tf_popef") -> logging.Logger:
    """A logger whose level follows the TF_POPEF_LOG_LEVEL environment variable (default WARNING)."""
    logger = logging.getLogger(name)
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(_FORMAT))
        logger.addHandler(handler)
        logger.setLevel(os.environ.get("TF_POPEF_LOG_LEVEL", "WARNING").upper())
        logger.propagate = False
    return logger
