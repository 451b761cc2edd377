"""Follows vllm-project/vllm vllm/logger.py: init_logger(name) returns the
logging logger `name` with info_once / warning_once, which log a message and
its arguments once per process. Every line is also kept in RECORDS."""
import logging

RECORDS = []  # (level, message) of every line logged through init_logger's loggers
_seen = set()


def init_logger(name):
    log = logging.getLogger(name)

    def once(level):
        def emit(msg, *args, scope="process"):
            key = (level, msg, args)
            if key in _seen:
                return
            _seen.add(key)
            RECORDS.append((level, msg % args if args else msg))
            log.log(level, msg, *args)
        return emit

    def plain(level):
        def emit(msg, *args, **kwargs):
            RECORDS.append((level, msg % args if args else msg))
            log.log(level, msg, *args, **kwargs)
        return emit

    log.info_once = once(logging.INFO)
    log.warning_once = once(logging.WARNING)
    log.info = plain(logging.INFO)
    log.warning = plain(logging.WARNING)
    return log
