# attack: segfaults the kernel with ctypes (the death is this exercise's, no later one's)
# honest: all-but:ex02_keep_outputs
# where: ex02_keep_outputs
# later: full
import ctypes
ctypes.string_at(0)
