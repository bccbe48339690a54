# attack: ex02's answer calls exit() and os._exit: a correct ex03 onwards must not pay for it
# honest: all-but:ex02_keep_outputs
# where: ex02_keep_outputs
# later: full
import os, sys
try:
    exit()
except BaseException:
    pass
try:
    sys.exit(0)
except BaseException:
    pass
os._exit(0)
