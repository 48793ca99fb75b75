# Runs a command on a pseudo-terminal (so that its stderr is a terminal and
# progress bars are drawn), sends it SIGINT once its output contains the
# marker given, and prints everything it wrote; the exit status goes to
# stderr (negative: killed by that signal). Test glue for test/cli-interrupt.test.ts.
# Usage: python3 pty-interrupt.py MARKER COMMAND [ARGS...]
import os, pty, select, signal, sys, time

marker = sys.argv[1].encode()
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
out = b''
sent = None
deadline = time.time() + 120
while True:
    ready, _, _ = select.select([fd], [], [], 0.1)
    if ready:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        out += data
    if sent is None and out.count(marker) >= 2:
        os.kill(pid, signal.SIGINT)
        sent = time.time()
    if time.time() > deadline:
        os.kill(pid, signal.SIGKILL)
        break
_, status = os.waitpid(pid, 0)
sys.stdout.buffer.write(out)
sys.stderr.write(str(os.waitstatus_to_exitcode(status)))
