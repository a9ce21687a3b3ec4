"""Run a command on a pseudo-terminal, wait for a table on it, press `q`, and report how it ended
and whether the terminal was in non-canonical mode while it ran and back in canonical mode after:
`exit N icanon_during B icanon_after B escape B`."""
import os
import pty
import sys
import termios
import time

pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
buf = b""
deadline = time.time() + 30
while b"STREAM" not in buf and time.time() < deadline:
    buf += os.read(fd, 4096)
time.sleep(0.3)
during = termios.tcgetattr(fd)[3] & termios.ICANON
os.write(fd, b"q")
_, status = os.waitpid(pid, 0)
after = termios.tcgetattr(fd)[3] & termios.ICANON
print(
    "exit", os.waitstatus_to_exitcode(status),
    "icanon_during", bool(during),
    "icanon_after", bool(after),
    "escape", b"\x1b[2J" in buf,
)
