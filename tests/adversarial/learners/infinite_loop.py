# attack: an answer that never returns and ignores KeyboardInterrupt: the per-cell limit must end it, charging this exercise only
# honest: all-but:ex02_keep_outputs
# where: ex02_keep_outputs
# later: full
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    try:
        pass
    except BaseException:
        pass
