"""The GPU library: real CUDA graphs with torch, the tiny GPT, decode loops, and the benchmarks that
record the course's GPU figures (``python -m graphcourse.gpulib.<bench>`` on a CUDA machine).

Importing this package needs no torch; its modules import torch themselves.
"""
