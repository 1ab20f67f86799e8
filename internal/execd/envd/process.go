// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package envd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"

	pb "github.com/corral-dev/corral/internal/e2b/envd/process"
	"github.com/corral-dev/corral/internal/execd/process"
)

// proc is a process started through envd: the command execd's table
// runs, and what List reports of it.
type proc struct {
	cmd    *process.Command
	pid    uint32
	tag    string
	config *pb.ProcessConfig
}

type processService struct{ s *Service }

// timeoutMargin is how long before a call's Connect-Timeout-Ms its
// process is killed, so the stream carries the end event before the call's
// deadline ends it.
const timeoutMargin = 100 * time.Millisecond

func (p *processService) Start(ctx context.Context, req *connect.Request[pb.StartRequest], stream *connect.ServerStream[pb.StartResponse]) error {
	s := p.s
	m := req.Msg
	cfg := m.GetProcess()
	if cfg == nil || cfg.GetCmd() == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd is required"))
	}
	id, err := s.identityFrom(req.Header(), "")
	if err != nil {
		return err
	}
	dir := id.home
	if id.cred == nil {
		dir = s.cfg.Workdir
	}
	if cfg.Cwd != nil && cfg.GetCwd() != "" {
		if dir, err = id.resolve(cfg.GetCwd()); err != nil {
			return err
		}
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() {
			return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd %s is not a directory in the sandbox", dir))
		}
	}
	env := s.cfg.Env(id.uid)
	if id.cred != nil {
		env = append(env, "HOME="+id.home, "USER="+id.name, "LOGNAME="+id.name)
	}
	for _, k := range slices.Sorted(maps.Keys(cfg.GetEnvs())) {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(cfg.GetEnvs()[k], 0) {
			return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("environment variable %q: a name must be non-empty and hold no '=' or NUL", k))
		}
		env = append(env, k+"="+cfg.GetEnvs()[k])
	}
	spec := process.Spec{Argv: append([]string{shellFor(cfg.GetCmd())}, cfg.GetArgs()...), Dir: dir, Env: env, Credential: id.cred,
		Background: true, Stdin: m.GetStdin()}
	if m.Pty != nil {
		sz := m.GetPty().GetSize()
		spec.Terminal = &process.Size{Cols: clampSize(sz.GetCols(), 80), Rows: clampSize(sz.GetRows(), 24)}
	}
	if d, ok := callTimeout(req.Header()); ok {
		spec.Timeout = max(d-timeoutMargin, time.Millisecond)
	}
	tag := m.GetTag()
	if tag != "" {
		if _, ok := s.lookup(&pb.ProcessSelector{Selector: &pb.ProcessSelector_Tag{Tag: tag}}); ok {
			return connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("a running process already has tag %q", tag))
		}
	}
	c, err := s.cfg.Table.Start(spec)
	if err != nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("start the process: %w", err))
	}
	if c.Pid() == 0 {
		// It did not start (no such program, say): E2B answers with a
		// stream that ends at once.
		ex, _ := c.Exit()
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("start %s: %s", cfg.GetCmd(), ex.Err))
	}
	pr := &proc{cmd: c, pid: uint32(c.Pid()), tag: tag, config: cfg}
	s.mu.Lock()
	s.procs[pr.pid] = pr
	s.mu.Unlock()
	return s.follow(ctx, req.Header().Get("Keepalive-Ping-Interval"), pr, func(ev *pb.ProcessEvent) error {
		return stream.Send(&pb.StartResponse{Event: ev})
	})
}

// shellFor is the program to run for cmd. E2B's SDKs run every command
// and terminal with /bin/bash; an image without it (busybox, alpine)
// runs them with bash from elsewhere on PATH, or with /bin/sh, whose -l,
// -c and -i mean the same.
func shellFor(cmd string) string {
	if cmd != "/bin/bash" {
		return cmd
	}
	if _, err := os.Stat(cmd); err == nil {
		return cmd
	}
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "/bin/sh"
}

// clampSize keeps a terminal dimension within what a terminal takes.
func clampSize(v uint32, def uint16) uint16 {
	if v == 0 {
		return def
	}
	return uint16(min(v, 1000))
}

// callTimeout reads Connect-Timeout-Ms.
func callTimeout(h interface{ Get(string) string }) (time.Duration, bool) {
	ms, err := strconv.ParseInt(h.Get("Connect-Timeout-Ms"), 10, 64)
	if err != nil || ms <= 0 {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

func (p *processService) Connect(ctx context.Context, req *connect.Request[pb.ConnectRequest], stream *connect.ServerStream[pb.ConnectResponse]) error {
	pr, err := p.s.find(req.Msg.GetProcess(), true)
	if err != nil {
		return err
	}
	return p.s.follow(ctx, req.Header().Get("Keepalive-Ping-Interval"), pr, func(ev *pb.ProcessEvent) error {
		return stream.Send(&pb.ConnectResponse{Event: ev})
	})
}

// follow streams a process's events: start, its retained output from the
// beginning and then as it comes, keepalives, and the end. It returns when
// the process has ended and its output is sent, or the client went away
// (the process goes on).
func (s *Service) follow(ctx context.Context, interval string, pr *proc, send func(*pb.ProcessEvent) error) error {
	if err := send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Start{Start: &pb.ProcessEvent_StartEvent{Pid: pr.pid}}}); err != nil {
		return err
	}
	events := make(chan *pb.ProcessEvent, 16)
	followCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	terminal := pr.cmd.Terminal()
	go func() {
		defer close(events)
		errc <- pr.cmd.Log.Follow(followCtx, 0, pr.cmd.Done(), func(rec process.Record) error {
			data := &pb.ProcessEvent_DataEvent{}
			b := slices.Clone(rec.Data)
			switch {
			case terminal:
				data.Output = &pb.ProcessEvent_DataEvent_Pty{Pty: b}
			case rec.Stream == process.Stderr:
				data.Output = &pb.ProcessEvent_DataEvent_Stderr{Stderr: b}
			default:
				data.Output = &pb.ProcessEvent_DataEvent_Stdout{Stdout: b}
			}
			select {
			case events <- &pb.ProcessEvent{Event: &pb.ProcessEvent_Data{Data: data}}:
				return nil
			case <-followCtx.Done():
				return followCtx.Err()
			}
		})
	}()
	every := s.keepaliveEvery(interval)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				if err := <-errc; err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return connect.NewError(connect.CodeInternal, fmt.Errorf("read the process's output: %w", err))
				}
				return send(&pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: endEvent(pr.cmd)}})
			}
			if err := send(ev); err != nil {
				return err
			}
			tick.Reset(every)
		case <-tick.C:
			if err := send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Keepalive{Keepalive: &pb.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
		case <-ctx.Done():
			// The client went away or its deadline passed; the process
			// is not the call's.
			return nil
		}
	}
}

// endEvent says how a finished command ended, as Go's os.ProcessState
// would: a signal gives exit code -1, exited false and "signal: NAME".
func endEvent(c *process.Command) *pb.ProcessEvent_EndEvent {
	ex, _ := c.Exit()
	end := &pb.ProcessEvent_EndEvent{ExitCode: int32(ex.Code), Exited: true, Status: fmt.Sprintf("exit status %d", ex.Code)}
	switch {
	case ex.TimedOut:
		end.ExitCode, end.Exited, end.Status = -1, false, "signal: killed"
		msg := "the process ran out of its call's time (Connect-Timeout-Ms) and was killed"
		end.Error = &msg
	case strings.HasPrefix(ex.Err, "signal: "):
		end.ExitCode, end.Exited, end.Status = -1, false, ex.Err
		end.Error = &ex.Err
	case ex.Code != 0:
		msg := end.Status
		if ex.Err != "" && !strings.HasPrefix(ex.Err, "exit status") {
			msg = ex.Err
		}
		end.Error = &msg
	}
	return end
}

// lookup finds a running process.
func (s *Service) lookup(sel *pb.ProcessSelector) (*proc, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid, pr := range s.procs {
		if !pr.cmd.Running() {
			if _, kept := s.cfg.Table.Get(pr.cmd.ID); !kept {
				delete(s.procs, pid)
			}
			continue
		}
		switch v := sel.GetSelector().(type) {
		case *pb.ProcessSelector_Pid:
			if v.Pid == pid {
				return pr, true
			}
		case *pb.ProcessSelector_Tag:
			if v.Tag != "" && v.Tag == pr.tag {
				return pr, true
			}
		}
	}
	return nil, false
}

// find resolves a selector to a process; finished ones too when ended is
// set (Connect to a process that has just ended replays it).
func (s *Service) find(sel *pb.ProcessSelector, ended bool) (*proc, error) {
	if sel.GetSelector() == nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("process: a pid or a tag is required"))
	}
	if pr, ok := s.lookup(sel); ok {
		return pr, nil
	}
	if ended {
		s.mu.Lock()
		pr, ok := s.procs[sel.GetPid()]
		s.mu.Unlock()
		if ok && sel.GetPid() != 0 {
			return pr, nil
		}
	}
	if t, ok := sel.GetSelector().(*pb.ProcessSelector_Tag); ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no running process has tag %q", t.Tag))
	}
	return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", sel.GetPid()))
}

func (p *processService) List(context.Context, *connect.Request[pb.ListRequest]) (*connect.Response[pb.ListResponse], error) {
	s := p.s
	out := &pb.ListResponse{}
	s.mu.Lock()
	for _, pid := range slices.Sorted(maps.Keys(s.procs)) {
		pr := s.procs[pid]
		if !pr.cmd.Running() {
			continue
		}
		info := &pb.ProcessInfo{Pid: pid, Config: pr.config}
		if pr.tag != "" {
			info.Tag = &pr.tag
		}
		out.Processes = append(out.Processes, info)
	}
	s.mu.Unlock()
	return connect.NewResponse(out), nil
}

func (p *processService) SendInput(_ context.Context, req *connect.Request[pb.SendInputRequest]) (*connect.Response[pb.SendInputResponse], error) {
	pr, err := p.s.find(req.Msg.GetProcess(), false)
	if err != nil {
		return nil, err
	}
	if err := writeInput(pr, req.Msg.GetInput()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.SendInputResponse{}), nil
}

// writeInput gives input to a process: stdin bytes to its standard
// input, pty bytes to its terminal.
func writeInput(pr *proc, in *pb.ProcessInput) error {
	var b []byte
	switch v := in.GetInput().(type) {
	case *pb.ProcessInput_Stdin:
		if pr.cmd.Terminal() {
			return connect.NewError(connect.CodeInvalidArgument, errors.New("the process runs on a terminal: send its input as pty"))
		}
		b = v.Stdin
	case *pb.ProcessInput_Pty:
		if !pr.cmd.Terminal() {
			return connect.NewError(connect.CodeInvalidArgument, errors.New("the process has no terminal: send its input as stdin"))
		}
		b = v.Pty
	default:
		return connect.NewError(connect.CodeInvalidArgument, errors.New("input: stdin or pty is required"))
	}
	if err := pr.cmd.WriteStdin(b); err != nil {
		if errors.Is(err, process.ErrNoStdin) {
			return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%w (start it with stdin: true)", err))
		}
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("write to the process's input: %w", err))
	}
	return nil
}

func (p *processService) StreamInput(_ context.Context, stream *connect.ClientStream[pb.StreamInputRequest]) (*connect.Response[pb.StreamInputResponse], error) {
	var pr *proc
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *pb.StreamInputRequest_Start:
			found, err := p.s.find(ev.Start.GetProcess(), false)
			if err != nil {
				return nil, err
			}
			pr = found
		case *pb.StreamInputRequest_Data:
			if pr == nil {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("the stream's first event must name the process (start)"))
			}
			if err := writeInput(pr, ev.Data.GetInput()); err != nil {
				return nil, err
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.StreamInputResponse{}), nil
}

func (p *processService) SendSignal(_ context.Context, req *connect.Request[pb.SendSignalRequest]) (*connect.Response[pb.SendSignalResponse], error) {
	var sig syscall.Signal
	switch req.Msg.GetSignal() {
	case pb.Signal_SIGNAL_SIGKILL:
		sig = syscall.SIGKILL
	case pb.Signal_SIGNAL_SIGTERM:
		sig = syscall.SIGTERM
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("signal %v: only SIGNAL_SIGTERM and SIGNAL_SIGKILL are sent", req.Msg.GetSignal()))
	}
	pr, err := p.s.find(req.Msg.GetProcess(), false)
	if err != nil {
		return nil, err
	}
	if err := pr.cmd.Signal(sig); err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("signal the process: %w", err))
	}
	return connect.NewResponse(&pb.SendSignalResponse{}), nil
}

func (p *processService) CloseStdin(_ context.Context, req *connect.Request[pb.CloseStdinRequest]) (*connect.Response[pb.CloseStdinResponse], error) {
	pr, err := p.s.find(req.Msg.GetProcess(), false)
	if err != nil {
		return nil, err
	}
	if err := pr.cmd.CloseStdin(); err != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, err)
	}
	return connect.NewResponse(&pb.CloseStdinResponse{}), nil
}

func (p *processService) Update(_ context.Context, req *connect.Request[pb.UpdateRequest]) (*connect.Response[pb.UpdateResponse], error) {
	pr, err := p.s.find(req.Msg.GetProcess(), false)
	if err != nil {
		return nil, err
	}
	if req.Msg.Pty != nil {
		sz := req.Msg.GetPty().GetSize()
		if sz.GetCols() == 0 || sz.GetRows() == 0 || sz.GetCols() > 1000 || sz.GetRows() > 1000 {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("pty size %dx%d: columns and rows must be from 1 to 1000", sz.GetCols(), sz.GetRows()))
		}
		if err := pr.cmd.Resize(process.Size{Cols: uint16(sz.GetCols()), Rows: uint16(sz.GetRows())}); err != nil {
			return nil, connect.NewError(connect.CodeFailedPrecondition, err)
		}
	}
	return connect.NewResponse(&pb.UpdateResponse{}), nil
}
