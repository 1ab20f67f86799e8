// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/execd/files"
	"github.com/corral-dev/corral/internal/execd/process"
)

// env builds the environment of a command that runs as uid: execd's own
// (without its secrets), then the runtime's env file, then the EXECD_ENVS
// file, then the request's variables.
func (s *Server) env(extra map[string]string, uid int) []string {
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, kv := range s.baseEnv {
		k, v, _ := strings.Cut(kv, "=")
		set(k, v)
	}
	for _, f := range []struct {
		path    string
		trusted bool
	}{{s.cfg.EnvFile, true}, {s.cfg.UserEnvFile, false}} {
		for _, kv := range readEnvFile(f.path, f.trusted, uid) {
			set(kv[0], kv[1])
		}
	}
	for k, v := range extra {
		set(k, v)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vars[k])
	}
	return out
}

// maxEnvFile bounds what is read of an env file.
const maxEnvFile = 1 << 20

// readEnvFile reads the KEY=VALUE lines of an env file ("export " and
// comments allowed) for a command running as uid. An untrusted file (one
// the sandbox's own programs may write, EXECD_ENVS) counts only when it is
// a regular file, not reached through a link, that root or uid owns: what
// an unprivileged entrypoint writes never sets the environment of root's
// commands (LD_PRELOAD and the like).
func readEnvFile(path string, trusted bool, uid int) [][2]string {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !trusted && (!ok || st.Uid != 0 && int(st.Uid) != uid) {
		return nil
	}
	var out [][2]string
	sc := bufio.NewScanner(io.LimitReader(f, maxEnvFile))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if ok && k != "" && !strings.ContainsAny(k, " \t\x00") && !strings.ContainsRune(v, 0) {
			out = append(out, [2]string{k, v})
		}
	}
	return out
}

func validateEnv(envs map[string]string) error {
	for k, v := range envs {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return badRequest("envs: %q is not a valid variable name (or its value has a NUL byte)", k)
		}
	}
	return nil
}

// workdir resolves and checks a requested working directory.
func (s *Server) resolveWorkdir(cwd string) (string, error) {
	if cwd == "" {
		return s.workdir, nil
	}
	abs, err := files.Resolve(cwd)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	if err != nil || !fi.IsDir() {
		return "", badRequest("cwd %q is not an existing directory", cwd)
	}
	return abs, nil
}

// credential turns uid/gid into process credentials: gid and supplementary
// groups come from the passwd and group files when only uid is given.
func credential(uid, gid *int64, env []string) (*syscall.Credential, []string, error) {
	if uid == nil {
		if gid != nil {
			return nil, nil, badRequest("gid needs uid")
		}
		return nil, env, nil
	}
	if *uid < 0 || *uid > 1<<31-1 || gid != nil && (*gid < 0 || *gid > 1<<31-1) {
		return nil, nil, badRequest("uid and gid must be from 0 to 2147483647")
	}
	cred := &syscall.Credential{Uid: uint32(*uid), Gid: uint32(*uid)}
	u, err := user.LookupId(strconv.FormatInt(*uid, 10))
	if err == nil {
		if g, err := strconv.ParseUint(u.Gid, 10, 32); err == nil {
			cred.Gid = uint32(g)
		}
		if ids, err := u.GroupIds(); err == nil {
			for _, id := range ids {
				if g, err := strconv.ParseUint(id, 10, 32); err == nil {
					cred.Groups = append(cred.Groups, uint32(g))
				}
			}
		}
		env = append(env, "HOME="+u.HomeDir, "USER="+u.Username, "LOGNAME="+u.Username)
	}
	if gid != nil {
		cred.Gid = uint32(*gid)
	}
	return cred, env, nil
}

// startCommand validates a request and starts it. Errors are the user's.
func (s *Server) startCommand(req api.RunCommandRequest) (*process.Command, error) {
	if strings.TrimSpace(req.Command) == "" {
		return nil, badRequest("command is required")
	}
	if strings.ContainsRune(req.Command, 0) {
		return nil, badRequest("command contains a NUL byte")
	}
	if req.Timeout != nil && *req.Timeout < 1 {
		return nil, badRequest("timeout is in milliseconds and must be at least 1 (omit it for no timeout)")
	}
	if err := validateEnv(req.Envs); err != nil {
		return nil, err
	}
	dir, err := s.resolveWorkdir(req.Cwd)
	if err != nil {
		return nil, err
	}
	uid := os.Geteuid()
	if req.UID != nil {
		uid = int(*req.UID)
	}
	cred, env, err := credential(req.UID, req.GID, s.env(req.Envs, uid))
	if err != nil {
		return nil, err
	}
	var timeout time.Duration
	if req.Timeout != nil {
		timeout = time.Duration(*req.Timeout) * time.Millisecond
	}
	c, err := s.table.Start(process.Spec{Script: req.Command, Dir: dir, Env: env, Credential: cred, Timeout: timeout, Background: req.Background})
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (s *Server) runCommand(w http.ResponseWriter, r *http.Request) {
	var req api.RunCommandRequest
	if err := decode(r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	c, err := s.startCommand(req)
	if err != nil {
		writeError(w, err)
		return
	}
	s.serveCommand(w, r, c, c.ID, cursors{}, req.Background)
}

// serveCommand streams a command: init, then (foreground) its output and
// terminal event, or (background) execution_complete at once.
func (s *Server) serveCommand(w http.ResponseWriter, r *http.Request, c *process.Command, initText string, from cursors, background bool) {
	mode := modeOf(w, r)
	es := newEventStream(w)
	if err := es.write(api.ServerStreamEvent{Type: api.EventInit, Text: initText}); err != nil {
		return
	}
	if background {
		_ = es.write(api.ServerStreamEvent{Type: api.EventExecutionComplete, ExecutionTime: max(time.Since(c.StartedAt).Milliseconds(), 1)})
		return
	}
	if err := s.streamOutput(r.Context(), es, c, from, mode); err != nil && r.Context().Err() == nil {
		s.log.WarnContext(r.Context(), "command stream ended early", "command_id", c.ID, "err", err)
	}
}

// resumeCommand continues a command's event stream from the cursors a
// client last saw (?stdout=N&stderr=M), losing and repeating nothing.
func (s *Server) resumeCommand(w http.ResponseWriter, r *http.Request, id string) {
	c, ok := s.table.Get(id)
	if !ok {
		writeError(w, commandNotFound(id))
		return
	}
	var cur cursors
	for _, p := range []struct {
		name string
		dst  *int64
	}{{"stdout", &cur.stdout}, {"stderr", &cur.stderr}} {
		if v := r.URL.Query().Get(p.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				writeError(w, badRequest("%s cursor %q: must be a byte offset", p.name, v))
				return
			}
			*p.dst = n
		}
	}
	s.serveCommand(w, r, c, c.ID, cur, false)
}

func commandNotFound(id string) error {
	return errdefs.Newf(errdefs.ErrNotFound, api.CodeExecdCommandNotFound, "command %s not found (it may have been removed by the retention policy)", id)
}

func (s *Server) interruptCommand(w http.ResponseWriter, r *http.Request) {
	id, err := query(r, "id")
	if err != nil {
		writeError(w, err)
		return
	}
	c, ok := s.table.Get(id)
	if !ok {
		// The contract lists no 404 here: an unknown id is a bad request.
		writeErrorStatus(w, http.StatusBadRequest, errdefs.Newf(errdefs.ErrNotFound, api.CodeExecdCommandNotFound, "command %s not found", id))
		return
	}
	if err := c.Interrupt(r.Context(), s.cfg.InterruptGrace); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) commandStatus(w http.ResponseWriter, _ *http.Request, id string) {
	c, ok := s.table.Get(id)
	if !ok {
		writeError(w, commandNotFound(id))
		return
	}
	writeJSON(w, http.StatusOK, commandStatus(c))
}

// commandStatus is how c stands now.
func commandStatus(c *process.Command) api.CommandStatusResponse {
	out := api.CommandStatusResponse{ID: c.ID, Content: c.Content, Running: true, StartedAt: c.StartedAt}
	if ex, done := c.Exit(); done {
		code := ex.Code
		fin := ex.FinishedAt
		out.Running, out.ExitCode, out.FinishedAt, out.Error = false, &code, &fin, ex.Err
	}
	return out
}

// listCommands answers the commands execd keeps, the newest first, a
// page at a time (a corral route: the console's history).
func (s *Server) listCommands(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, offset := 50, 0
	for _, p := range []struct {
		name    string
		to      *int
		min, mx int
	}{{"limit", &limit, 1, 200}, {"offset", &offset, 0, 1 << 30}} {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < p.min || n > p.mx {
			writeError(w, badRequest("%s %q: must be a whole number from %d to %d", p.name, v, p.min, p.mx))
			return
		}
		*p.to = n
	}
	all := s.table.List()
	out := api.CommandList{Items: []api.CommandSummary{}, Total: len(all)}
	for _, c := range all[min(offset, len(all)):min(offset+limit, len(all))] {
		out.Items = append(out.Items, api.CommandSummary{CommandStatusResponse: commandStatus(c), Background: c.Background, OutputBytes: c.Log.Size()})
	}
	writeJSON(w, http.StatusOK, out)
}

// maxLogRead is the largest limit one logs read takes.
const maxLogRead = 64 << 20

// commandLogs serves a command's combined output from a byte cursor; the
// EXECD-COMMANDS-TAIL-CURSOR header is where the next read starts.
func (s *Server) commandLogs(w http.ResponseWriter, r *http.Request, id string) {
	c, ok := s.table.Get(id)
	if !ok {
		writeError(w, commandNotFound(id))
		return
	}
	var cur int64
	if v := r.URL.Query().Get("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, badRequest("cursor %q: must be a byte offset (0 or more)", v))
			return
		}
		cur = n
	}
	// limit (a corral extension) bounds one read, for a client that
	// follows a command printing faster than it can take.
	var limit int64
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > maxLogRead {
			writeError(w, badRequest("limit %q: must be a byte count from 1 to %d", v, maxLogRead))
			return
		}
		limit = n
	}
	rd, next := c.Log.Reader(cur)
	if limit > 0 && next-min(cur, next) > limit {
		next = min(cur, next) + limit
		rd = io.LimitReader(rd, limit)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set(api.HeaderCommandsTailCursor, strconv.FormatInt(next, 10))
	w.Header().Set("Content-Length", strconv.FormatInt(next-min(cur, next), 10))
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, rd)
}
