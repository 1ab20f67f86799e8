// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package jupyter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-zeromq/zmq4"
)

// ErrDied is returned when the kernel process exits under a request.
var ErrDied = errors.New("jupyter: the kernel exited")

// Options say where and how a kernel runs.
type Options struct {
	// Dir is the kernel's working directory.
	Dir string
	// Env is the kernel's environment before the spec's env is applied.
	Env []string
	// RuntimeDir holds the connection file (created 0700).
	RuntimeDir string
	// Credential, when set, runs the kernel as another user.
	Credential *syscall.Credential
}

// Info is what kernel_info_reply says of the kernel.
type Info struct {
	ProtocolVersion string `json:"protocol_version"`
	Implementation  string `json:"implementation"`
	LanguageInfo    struct {
		Name          string `json:"name"`
		Version       string `json:"version"`
		FileExtension string `json:"file_extension"`
	} `json:"language_info"`
}

// connection is a kernel's connection file.
type connection struct {
	ShellPort       int    `json:"shell_port"`
	IOPubPort       int    `json:"iopub_port"`
	StdinPort       int    `json:"stdin_port"`
	ControlPort     int    `json:"control_port"`
	HBPort          int    `json:"hb_port"`
	IP              string `json:"ip"`
	Key             string `json:"key"`
	Transport       string `json:"transport"`
	SignatureScheme string `json:"signature_scheme"`
	KernelName      string `json:"kernel_name"`
}

// Kernel is a running kernel and the client's sockets to it.
type Kernel struct {
	spec     Spec
	info     Info
	conn     connection
	sign     signer
	session  string
	connFile string
	cmd      *exec.Cmd
	seq      atomic.Uint64
	output   *tail
	// ackTimeout is AckTimeout (shorter in tests).
	ackTimeout time.Duration

	// ctx is the sockets' life; it ends when the kernel exits or is shut
	// down.
	ctx    context.Context
	cancel context.CancelFunc

	shell, control, iopub zmq4.Socket
	hbMu                  sync.Mutex
	hb                    zmq4.Socket

	mu      sync.Mutex
	replies map[string]chan Message
	outputs map[string]*queue

	badMessages atomic.Int64

	exited  chan struct{}
	exitErr error
	stop    sync.Once
}

// Start launches a kernel from spec and returns once it has answered
// kernel_info_request on shell and has been heard on iopub, so no output
// of the first execution can be lost. ctx bounds the start.
//
// The ports are chosen free but closed again for the kernel to bind, so
// another socket can take one in between (another kernel's, or one this
// kernel binds to a random port for itself): then the kernel cannot bind
// it, or a socket of the wrong kind answers there. Such a start is tried
// again with new ports, up to three times.
func Start(ctx context.Context, spec Spec, opt Options) (*Kernel, error) {
	for attempt := 1; ; attempt++ {
		k, err := start(ctx, spec, opt)
		if err == nil || attempt == 3 || !errors.Is(err, errPortTaken) || ctx.Err() != nil {
			return k, err
		}
	}
}

// errPortTaken marks a start that lost one of its ports to another socket.
var errPortTaken = errors.New("a port of the kernel's was taken by another socket")

func start(ctx context.Context, spec Spec, opt Options) (_ *Kernel, err error) {
	if len(spec.Argv) == 0 {
		return nil, fmt.Errorf("jupyter: kernelspec %s has no argv", spec.Name)
	}
	ports, err := pickPorts(5)
	if err != nil {
		return nil, err
	}
	key, err := randomHex(32)
	if err != nil {
		return nil, err
	}
	session, err := randomHex(16)
	if err != nil {
		return nil, err
	}
	k := &Kernel{
		spec: spec, session: session, sign: signer{key: []byte(key)},
		conn: connection{ShellPort: ports[0], IOPubPort: ports[1], StdinPort: ports[2], ControlPort: ports[3], HBPort: ports[4],
			IP: "127.0.0.1", Key: key, Transport: "tcp", SignatureScheme: "hmac-sha256", KernelName: spec.Name},
		replies: map[string]chan Message{}, outputs: map[string]*queue{},
		exited: make(chan struct{}), output: &tail{max: 16 << 10}, ackTimeout: AckTimeout,
	}
	k.ctx, k.cancel = context.WithCancel(context.Background())
	if err := os.MkdirAll(opt.RuntimeDir, 0o700); err != nil {
		return nil, fmt.Errorf("jupyter: runtime dir: %w", err)
	}
	k.connFile = filepath.Join(opt.RuntimeDir, "kernel-"+session+".json")
	b, _ := json.Marshal(k.conn)
	if err := os.WriteFile(k.connFile, b, 0o600); err != nil {
		return nil, fmt.Errorf("jupyter: connection file: %w", err)
	}
	defer func() {
		if err != nil {
			_ = k.Shutdown(0)
		}
	}()
	argv := make([]string, len(spec.Argv))
	for i, a := range spec.Argv {
		a = strings.ReplaceAll(a, "{connection_file}", k.connFile)
		argv[i] = strings.ReplaceAll(a, "{resource_dir}", spec.Dir)
	}
	k.cmd = exec.Command(argv[0], argv[1:]...)
	k.cmd.Dir = opt.Dir
	k.cmd.Env = kernelEnv(opt.Env, spec.Env)
	k.cmd.Stdout, k.cmd.Stderr = k.output, k.output
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: opt.Credential}
	// A kernel's children may hold its output pipe open after it exits.
	k.cmd.WaitDelay = time.Second
	if err := k.cmd.Start(); err != nil {
		os.Remove(k.connFile)
		return nil, fmt.Errorf("jupyter: start kernel %s: %w", spec.Name, err)
	}
	go func() {
		k.exitErr = k.cmd.Wait()
		close(k.exited)
		k.cancel()
	}()
	stopWatch := context.AfterFunc(ctx, k.cancel)
	defer stopWatch()

	if err := k.dial(); err != nil {
		return nil, k.startError(ctx, err)
	}
	if err := k.handshake(ctx); err != nil {
		return nil, k.startError(ctx, err)
	}
	return k, nil
}

// startError explains why a start failed: the kernel's exit and its last
// output, or the caller's deadline.
func (k *Kernel) startError(ctx context.Context, err error) error {
	select {
	case <-k.exited:
		out := k.output.String()
		err := fmt.Errorf("jupyter: kernel %s exited while starting (%v): %s", k.spec.Name, k.exitErr, out)
		if strings.Contains(out, "Address already in use") {
			err = fmt.Errorf("%w: %w", errPortTaken, err)
		}
		return err
	default:
	}
	if ctx.Err() != nil {
		return fmt.Errorf("jupyter: kernel %s did not answer in time: %w", k.spec.Name, ctx.Err())
	}
	return err
}

func kernelEnv(base []string, spec map[string]string) []string {
	env := make([]string, 0, len(base)+len(spec)+1)
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := spec[name]; !ok {
			env = append(env, kv)
		}
	}
	for k, v := range spec {
		env = append(env, k+"="+v)
	}
	// ipykernel's debugger warns about frozen modules on every start.
	if !hasVar(env, "PYDEVD_DISABLE_FILE_VALIDATION") {
		env = append(env, "PYDEVD_DISABLE_FILE_VALIDATION=1")
	}
	return env
}

func hasVar(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}

func (k *Kernel) socketOptions() []zmq4.Option {
	return []zmq4.Option{
		zmq4.WithDialerRetry(20 * time.Millisecond), zmq4.WithDialerMaxRetries(-1),
		zmq4.WithLogger(log.New(io.Discard, "", 0)),
	}
}

func (k *Kernel) endpoint(port int) string { return fmt.Sprintf("tcp://127.0.0.1:%d", port) }

// dial connects the sockets; each dial retries until the kernel has bound
// its port or k.ctx ends.
func (k *Kernel) dial() error {
	opts := k.socketOptions()
	k.shell = zmq4.NewDealer(k.ctx, append(opts, zmq4.WithID(zmq4.SocketIdentity(k.session+"-shell")))...)
	k.control = zmq4.NewDealer(k.ctx, append(opts, zmq4.WithID(zmq4.SocketIdentity(k.session+"-control")))...)
	k.iopub = zmq4.NewSub(k.ctx, opts...)
	k.hb = zmq4.NewReq(k.ctx, opts...)
	if err := k.iopub.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		return err
	}
	for _, d := range []struct {
		s    zmq4.Socket
		port int
	}{{k.iopub, k.conn.IOPubPort}, {k.shell, k.conn.ShellPort}, {k.control, k.conn.ControlPort}, {k.hb, k.conn.HBPort}} {
		if err := d.s.Dial(k.endpoint(d.port)); err != nil {
			err = fmt.Errorf("jupyter: connect to kernel: %w", err)
			if strings.Contains(err.Error(), "not compatible") {
				// Another kind of socket listens there: not the kernel's.
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		}
	}
	go k.readReplies(k.shell)
	go k.readReplies(k.control)
	go k.readIOPub()
	return nil
}

// handshake sends kernel_info_request until a reply and an iopub message
// about it arrive: a SUB socket misses what is published before its
// subscription reaches the kernel.
func (k *Kernel) handshake(ctx context.Context) error {
	wait := 250 * time.Millisecond
	for {
		m, err := k.newMessage("kernel_info_request", struct{}{})
		if err != nil {
			return err
		}
		rc, q := k.route(m.Header.MsgID)
		if err := k.send(k.shell, m); err != nil {
			k.unroute(m.Header.MsgID)
			return err
		}
		t := time.NewTimer(wait)
		var reply *Message
		heard := false
	loop:
		for !(reply != nil && heard) {
			select {
			case r := <-rc:
				reply = &r
			case <-q.notify:
				heard = len(q.take()) > 0 || heard
			case <-t.C:
				break loop
			case <-k.exited:
				t.Stop()
				k.unroute(m.Header.MsgID)
				return ErrDied
			case <-ctx.Done():
				t.Stop()
				k.unroute(m.Header.MsgID)
				return ctx.Err()
			}
		}
		t.Stop()
		k.unroute(m.Header.MsgID)
		if reply != nil && heard {
			if err := json.Unmarshal(reply.Content, &k.info); err != nil {
				return fmt.Errorf("jupyter: kernel_info_reply: %w", err)
			}
			return nil
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// Spec is the kernelspec the kernel was started from.
func (k *Kernel) Spec() Spec { return k.spec }

// Info is the kernel's kernel_info_reply.
func (k *Kernel) Info() Info { return k.info }

// Pid is the kernel process's pid (also its process group).
func (k *Kernel) Pid() int { return k.cmd.Process.Pid }

// Exited is closed once the kernel process has exited.
func (k *Kernel) Exited() <-chan struct{} { return k.exited }

// ExitError says how the kernel exited (valid once Exited is closed).
func (k *Kernel) ExitError() error { return k.exitErr }

// Output is the tail of what the kernel process itself printed.
func (k *Kernel) Output() string { return k.output.String() }

// BadMessages counts messages dropped for a wrong signature.
func (k *Kernel) BadMessages() int64 { return k.badMessages.Load() }

func (k *Kernel) newMessage(msgType string, content any) (Message, error) {
	c, err := json.Marshal(content)
	if err != nil {
		return Message{}, err
	}
	return Message{
		Header: Header{MsgID: fmt.Sprintf("%s_%d", k.session, k.seq.Add(1)), Session: k.session, Username: "corral",
			Date: time.Now().UTC().Format(time.RFC3339Nano), MsgType: msgType, Version: ProtocolVersion},
		Content: c,
	}, nil
}

func (k *Kernel) send(s zmq4.Socket, m Message) error { return k.sendSigned(s, m, k.sign) }

func (k *Kernel) sendSigned(s zmq4.Socket, m Message, sign signer) error {
	frames, err := sign.encode(m)
	if err != nil {
		return err
	}
	if err := s.SendMulti(zmq4.NewMsgFrom(frames...)); err != nil {
		select {
		case <-k.exited:
			return ErrDied
		default:
		}
		return fmt.Errorf("jupyter: send %s: %w", m.Header.MsgType, err)
	}
	return nil
}

// route registers where the reply to, and the iopub output of, a request
// go.
func (k *Kernel) route(id string) (chan Message, *queue) {
	rc, q := make(chan Message, 1), newQueue()
	k.mu.Lock()
	k.replies[id], k.outputs[id] = rc, q
	k.mu.Unlock()
	return rc, q
}

func (k *Kernel) unroute(id string) {
	k.mu.Lock()
	delete(k.replies, id)
	delete(k.outputs, id)
	k.mu.Unlock()
}

func (k *Kernel) recv(s zmq4.Socket) (Message, bool) {
	for {
		zm, err := s.Recv()
		if err != nil {
			return Message{}, false
		}
		m, err := k.sign.decode(zm.Frames)
		if err != nil {
			k.badMessages.Add(1)
			continue
		}
		return m, true
	}
}

func (k *Kernel) readReplies(s zmq4.Socket) {
	for {
		m, ok := k.recv(s)
		if !ok {
			return
		}
		k.mu.Lock()
		rc := k.replies[m.Parent.MsgID]
		k.mu.Unlock()
		if rc != nil {
			select {
			case rc <- m:
			default:
			}
		}
	}
}

// readIOPub hands iopub messages to the request they answer and never
// blocks: the kernel's PUB socket drops what a slow reader leaves.
func (k *Kernel) readIOPub() {
	for {
		m, ok := k.recv(k.iopub)
		if !ok {
			return
		}
		k.mu.Lock()
		q := k.outputs[m.Parent.MsgID]
		k.mu.Unlock()
		if q != nil {
			q.push(m)
		}
	}
}

// request sends a request on s and waits for its reply.
func (k *Kernel) request(ctx context.Context, s zmq4.Socket, msgType string, content any) (Message, error) {
	m, err := k.newMessage(msgType, content)
	if err != nil {
		return Message{}, err
	}
	rc, _ := k.route(m.Header.MsgID)
	defer k.unroute(m.Header.MsgID)
	if err := k.send(s, m); err != nil {
		return Message{}, err
	}
	select {
	case r := <-rc:
		return r, nil
	case <-k.exited:
		return Message{}, ErrDied
	case <-ctx.Done():
		return Message{}, ctx.Err()
	}
}

// Interrupt interrupts the running execution: SIGINT to the kernel's
// process group, or interrupt_request on control when the spec asks.
func (k *Kernel) Interrupt(ctx context.Context) error {
	select {
	case <-k.exited:
		return ErrDied
	default:
	}
	if k.spec.InterruptByMessage() {
		_, err := k.request(ctx, k.control, "interrupt_request", struct{}{})
		return err
	}
	if err := syscall.Kill(-k.cmd.Process.Pid, syscall.SIGINT); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("jupyter: interrupt: %w", err)
	}
	return nil
}

// Ping checks the heartbeat channel: the kernel echoes within timeout.
func (k *Kernel) Ping(timeout time.Duration) error {
	k.hbMu.Lock()
	defer k.hbMu.Unlock()
	done := make(chan error, 1)
	hb := k.hb
	go func() {
		if err := hb.Send(zmq4.NewMsgString("ping")); err != nil {
			done <- err
			return
		}
		_, err := hb.Recv()
		done <- err
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-k.exited:
		return ErrDied
	case <-t.C:
		// A REQ socket waits for its reply forever: start over with a new one.
		hb.Close()
		k.hb = zmq4.NewReq(k.ctx, k.socketOptions()...)
		go func(s zmq4.Socket) { _ = s.Dial(k.endpoint(k.conn.HBPort)) }(k.hb)
		return fmt.Errorf("jupyter: no heartbeat in %v", timeout)
	}
}

// Shutdown asks the kernel to exit (shutdown_request on control), kills
// its process group after grace, and closes the sockets. Safe to call more
// than once and on a kernel that has exited.
func (k *Kernel) Shutdown(grace time.Duration) error {
	var err error
	k.stop.Do(func() {
		if k.cmd != nil && k.cmd.Process != nil {
			select {
			case <-k.exited:
			default:
				if grace > 0 && k.control != nil {
					ctx, cancel := context.WithTimeout(context.Background(), grace)
					if _, rerr := k.request(ctx, k.control, "shutdown_request", map[string]bool{"restart": false}); rerr == nil {
						select {
						case <-k.exited:
						case <-ctx.Done():
						}
					}
					cancel()
				}
			}
			// The whole group: a kernel's children go with it.
			_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
			select {
			case <-k.exited:
			case <-time.After(10 * time.Second):
				err = fmt.Errorf("jupyter: kernel %d did not exit after SIGKILL", k.cmd.Process.Pid)
			}
		}
		k.cancel()
		for _, s := range []zmq4.Socket{k.shell, k.control, k.iopub} {
			if s != nil {
				s.Close()
			}
		}
		k.hbMu.Lock()
		if k.hb != nil {
			k.hb.Close()
		}
		k.hbMu.Unlock()
		if k.connFile != "" {
			os.Remove(k.connFile)
		}
	})
	return err
}

// pickPorts is freePorts; a test gives it ports already taken.
var pickPorts = freePorts

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("jupyter: pick a port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// tail keeps the last max bytes written.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	t.mu.Unlock()
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}
