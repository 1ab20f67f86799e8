# Copyright 2026 The corral Authors
# SPDX-License-Identifier: Apache-2.0
"""Jupyter kernels of corral's code-interpreter image that Debian does not
package: bash, and Go (through corral-go-eval, a Go interpreter). Each
keeps one process for its context's life, so what a cell defines (shell
variables, the working directory, Go declarations) is there for the next.

    python3 -m corral_kernels bash|go -f CONNECTION_FILE
"""

import json
import os
import selectors
import signal
import subprocess
import sys
import uuid

from ipykernel.kernelapp import IPKernelApp
from ipykernel.kernelbase import Kernel


class _Base(Kernel):
    implementation_version = "1"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.proc = None
        self._start()

    def _start(self):
        raise NotImplementedError

    def _stream(self, name, text):
        if text:
            self.send_response(self.iopub_socket, "stream", {"name": name, "text": text})

    def _error(self, name, value):
        self.send_response(self.iopub_socket, "error", {"ename": name, "evalue": value, "traceback": [f"{name}: {value}"]})
        return {"status": "error", "execution_count": self.execution_count, "ename": name, "evalue": value, "traceback": []}

    def _interrupt_children(self):
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGINT)
            except ProcessLookupError:
                pass

    def do_shutdown(self, restart):
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return {"status": "ok", "restart": restart}


class BashKernel(_Base):
    implementation = "corral-bash"
    language = "bash"
    language_version = "5"
    language_info = {"name": "bash", "mimetype": "text/x-sh", "file_extension": ".sh"}
    banner = "bash (corral)"

    def _start(self):
        self.proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, env=dict(os.environ, PS1="", PS2=""),
        )

    def do_execute(self, code, silent, store_history=True, user_expressions=None, allow_stdin=False):
        if self.proc.poll() is not None:
            self._start()
        mark = "__corral_" + uuid.uuid4().hex
        # The cell runs in this shell (eval), so what it sets stays; a
        # mark on each stream says where its output ends, with its status.
        script = f"eval \"$(cat <<'{mark}'\n{code}\n{mark}\n)\"\nprintf '\\n{mark} %d\\n' $?\nprintf '\\n{mark}\\n' >&2\n"
        try:
            self.proc.stdin.write(script.encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            self._start()
            return self._error("ShellExited", "bash had exited; a new one was started: run the cell again")
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ, "stdout")
        sel.register(self.proc.stderr, selectors.EVENT_READ, "stderr")
        pending = {"stdout": b"", "stderr": b""}
        done = {"stdout": False, "stderr": False}
        status = 0
        while not all(done.values()):
            try:
                events = sel.select()
            except KeyboardInterrupt:
                self._interrupt_children()
                continue
            for key, _ in events:
                name = key.data
                chunk = os.read(key.fileobj.fileno(), 65536)
                if not chunk:
                    sel.close()
                    self._start()
                    return self._error("ShellExited", "the cell ended bash (exit, or a signal); a new one was started, without the old one's state")
                buf = pending[name] + chunk
                end = buf.find(("\n" + mark).encode())
                if end >= 0:
                    rest = buf[end + 1 + len(mark):].decode(errors="replace").strip()
                    if name == "stdout" and rest:
                        status = int(rest.split()[0])
                    buf, done[name] = buf[:end], True
                    sel.unregister(key.fileobj)
                    pending[name] = b""
                    if not silent:
                        self._stream(name, buf.decode(errors="replace"))
                    continue
                # Keep back what could be the start of the mark.
                keep = len(mark) + 1
                out, pending[name] = buf[:-keep] if len(buf) > keep else b"", buf[-keep:] if len(buf) > keep else buf
                if out and not silent:
                    self._stream(name, out.decode(errors="replace"))
        sel.close()
        if status != 0:
            return self._error("ExitStatus", f"the cell's last command exited with status {status}")
        return {"status": "ok", "execution_count": self.execution_count, "payload": [], "user_expressions": {}}


class GoKernel(_Base):
    implementation = "corral-go"
    language = "go"
    language_version = "1"
    language_info = {"name": "go", "mimetype": "text/x-go", "file_extension": ".go"}
    banner = "Go (corral, yaegi)"

    def _start(self):
        self.proc = subprocess.Popen(
            ["corral-go-eval"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )

    def do_execute(self, code, silent, store_history=True, user_expressions=None, allow_stdin=False):
        if self.proc.poll() is not None:
            self._start()
        try:
            self.proc.stdin.write((json.dumps({"code": code}) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            self._start()
            return self._error("InterpreterExited", "the Go interpreter had exited; a new one was started: run the cell again")
        while True:
            try:
                line = self.proc.stdout.readline()
            except KeyboardInterrupt:
                self._interrupt_children()
                self._start()
                return self._error("KeyboardInterrupt", "interrupted: the Go interpreter was restarted, without its state")
            if not line:
                self._start()
                return self._error("InterpreterExited", "the Go interpreter exited while the cell ran; a new one was started, without the old one's state")
            msg = json.loads(line)
            if "stream" in msg:
                if not silent:
                    self._stream(msg["stream"], msg["text"])
                continue
            if msg.get("error"):
                return self._error(msg["error"]["name"], msg["error"]["value"])
            if "result" in msg and not silent:
                self.send_response(self.iopub_socket, "execute_result",
                                   {"execution_count": self.execution_count, "data": {"text/plain": msg["result"]}, "metadata": {}})
            return {"status": "ok", "execution_count": self.execution_count, "payload": [], "user_expressions": {}}


KERNELS = {"bash": BashKernel, "go": GoKernel}

if __name__ == "__main__":
    name = sys.argv.pop(1)
    IPKernelApp.launch_instance(kernel_class=KERNELS[name])
