// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package envd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/fsnotify/fsnotify"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/corral-dev/corral/internal/e2b/envd/filesystem"
)

type filesystemService struct{ s *Service }

// maxListEntries bounds one ListDir answer.
const maxListEntries = 100000

// entryInfo describes path (not following a final symbolic link).
func entryInfo(path string) (*pb.EntryInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	return entryFrom(path, fi), nil
}

func entryFrom(path string, fi fs.FileInfo) *pb.EntryInfo {
	e := &pb.EntryInfo{Name: fi.Name(), Path: path, Size: fi.Size(), Mode: uint32(fi.Mode().Perm()),
		Permissions: fi.Mode().String(), ModifiedTime: timestamppb.New(fi.ModTime())}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = pb.FileType_FILE_TYPE_SYMLINK
		if t, err := os.Readlink(path); err == nil {
			e.SymlinkTarget = &t
		}
	case fi.IsDir():
		e.Type = pb.FileType_FILE_TYPE_DIRECTORY
	case fi.Mode().IsRegular():
		e.Type = pb.FileType_FILE_TYPE_FILE
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Owner, e.Group = ownerName(st.Uid), groupName(st.Gid)
	}
	return e
}

func ownerName(uid uint32) string {
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		return u.Username
	}
	return strconv.FormatUint(uint64(uid), 10)
}

func groupName(gid uint32) string {
	if g, err := user.LookupGroupId(strconv.FormatUint(uint64(gid), 10)); err == nil {
		return g.Name
	}
	return strconv.FormatUint(uint64(gid), 10)
}

// target resolves a request's path for its user.
func (f *filesystemService) target(h http.Header, p string) (identity, string, error) {
	id, err := f.s.identityFrom(h, "")
	if err != nil {
		return identity{}, "", err
	}
	path, err := id.resolve(p)
	return id, path, err
}

func (f *filesystemService) Stat(_ context.Context, req *connect.Request[pb.StatRequest]) (*connect.Response[pb.StatResponse], error) {
	_, path, err := f.target(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	e, err := entryInfo(path)
	if err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&pb.StatResponse{Entry: e}), nil
}

func (f *filesystemService) MakeDir(_ context.Context, req *connect.Request[pb.MakeDirRequest]) (*connect.Response[pb.MakeDirResponse], error) {
	id, path, err := f.target(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.IsDir() {
			return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("directory %s already exists", path))
		}
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s exists and is not a directory", path))
	}
	if err := id.mkdirAll(path); err != nil {
		return nil, fsError(err)
	}
	e, err := entryInfo(path)
	if err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&pb.MakeDirResponse{Entry: e}), nil
}

func (f *filesystemService) Move(_ context.Context, req *connect.Request[pb.MoveRequest]) (*connect.Response[pb.MoveResponse], error) {
	id, src, err := f.target(req.Header(), req.Msg.GetSource())
	if err != nil {
		return nil, err
	}
	dst, err := id.resolve(req.Msg.GetDestination())
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(src); err != nil {
		return nil, fsError(err)
	}
	if err := id.mkdirAll(filepath.Dir(dst)); err != nil {
		return nil, fsError(err)
	}
	if err := os.Rename(src, dst); err != nil {
		return nil, fsError(err)
	}
	e, err := entryInfo(dst)
	if err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&pb.MoveResponse{Entry: e}), nil
}

func (f *filesystemService) ListDir(ctx context.Context, req *connect.Request[pb.ListDirRequest]) (*connect.Response[pb.ListDirResponse], error) {
	_, dir, err := f.target(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	depth := int(req.Msg.GetDepth())
	if depth == 0 {
		depth = 1
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fsError(err)
	}
	if !fi.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is not a directory", dir))
	}
	out := &pb.ListDirResponse{}
	var walk func(d string, level int) error
	walk = func(d string, level int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		ents, err := os.ReadDir(d)
		if err != nil {
			if level > 1 {
				return nil // a subdirectory that cannot be read is left out
			}
			return err
		}
		for _, de := range ents {
			p := filepath.Join(d, de.Name())
			info, err := de.Info()
			if err != nil {
				continue
			}
			if len(out.Entries) >= maxListEntries {
				return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%s holds more than %d entries at depth %d; list less deep", dir, maxListEntries, depth))
			}
			out.Entries = append(out.Entries, entryFrom(p, info))
			if de.IsDir() && level < depth {
				if err := walk(p, level+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(dir, 1); err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(out), nil
}

func (f *filesystemService) Remove(_ context.Context, req *connect.Request[pb.RemoveRequest]) (*connect.Response[pb.RemoveResponse], error) {
	_, path, err := f.target(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if path == "/" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("the root directory cannot be removed"))
	}
	if _, err := os.Lstat(path); err != nil {
		return nil, fsError(err)
	}
	if err := os.RemoveAll(path); err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&pb.RemoveResponse{}), nil
}

// watcher turns fsnotify's events under a directory into E2B's.
type watcher struct {
	root      string
	recursive bool
	entries   bool
	fw        *fsnotify.Watcher
}

// newWatcher watches dir (and, recursive, the directories under it).
func newWatcher(dir string, recursive, entries bool) (*watcher, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fsError(err)
	}
	if !fi.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is not a directory", dir))
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("watch %s: %w", dir, err))
	}
	w := &watcher{root: dir, recursive: recursive, entries: entries, fw: fw}
	if err := w.add(dir); err != nil {
		_ = fw.Close()
		return nil, err
	}
	return w, nil
}

// add watches dir, and the directories under it when recursive.
func (w *watcher) add(dir string) error {
	if err := w.fw.Add(dir); err != nil {
		return fsError(err)
	}
	if !w.recursive {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, de := range ents {
		if de.IsDir() {
			_ = w.add(filepath.Join(dir, de.Name()))
		}
	}
	return nil
}

// convert turns one fsnotify event into E2B's (nil for none), watching a
// directory created under a recursive watch.
func (w *watcher) convert(ev fsnotify.Event) *pb.FilesystemEvent {
	rel, err := filepath.Rel(w.root, ev.Name)
	if err != nil {
		return nil
	}
	var typ pb.EventType
	switch {
	case ev.Has(fsnotify.Create):
		typ = pb.EventType_EVENT_TYPE_CREATE
		if w.recursive {
			if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
				_ = w.add(ev.Name)
			}
		}
	case ev.Has(fsnotify.Write):
		typ = pb.EventType_EVENT_TYPE_WRITE
	case ev.Has(fsnotify.Remove):
		typ = pb.EventType_EVENT_TYPE_REMOVE
	case ev.Has(fsnotify.Rename):
		typ = pb.EventType_EVENT_TYPE_RENAME
	case ev.Has(fsnotify.Chmod):
		typ = pb.EventType_EVENT_TYPE_CHMOD
	default:
		return nil
	}
	out := &pb.FilesystemEvent{Name: rel, Type: typ}
	if w.entries && typ != pb.EventType_EVENT_TYPE_REMOVE && typ != pb.EventType_EVENT_TYPE_RENAME {
		if e, err := entryInfo(ev.Name); err == nil {
			out.Entry = e
		}
	}
	return out
}

func (w *watcher) close() { _ = w.fw.Close() }

func (f *filesystemService) WatchDir(ctx context.Context, req *connect.Request[pb.WatchDirRequest], stream *connect.ServerStream[pb.WatchDirResponse]) error {
	_, dir, err := f.target(req.Header(), req.Msg.GetPath())
	if err != nil {
		return err
	}
	w, err := newWatcher(dir, req.Msg.GetRecursive(), req.Msg.GetIncludeEntry())
	if err != nil {
		return err
	}
	defer w.close()
	if err := stream.Send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Start{Start: &pb.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	every := f.s.keepaliveEvery(req.Header().Get("Keepalive-Ping-Interval"))
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err, ok := <-w.fw.Errors:
			if !ok {
				return nil
			}
			return connect.NewError(connect.CodeInternal, fmt.Errorf("watch %s: %w", dir, err))
		case ev, ok := <-w.fw.Events:
			if !ok {
				return nil
			}
			if out := w.convert(ev); out != nil {
				if err := stream.Send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Filesystem{Filesystem: out}}); err != nil {
					return err
				}
				tick.Reset(every)
			}
		case <-tick.C:
			if err := stream.Send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Keepalive{Keepalive: &pb.WatchDirResponse_KeepAlive{}}}); err != nil {
				return err
			}
		}
	}
}

// pollWatcher is a watcher whose events wait for GetWatcherEvents.
type pollWatcher struct {
	w    *watcher
	done chan struct{}
	// mu guards events and err.
	mu     sync.Mutex
	events []*pb.FilesystemEvent
	err    error
}

// maxPolledEvents bounds the events a polling watcher keeps unread.
const maxPolledEvents = 10000

// maxWatchers bounds the polling watchers alive at once.
const maxWatchers = 256

func (p *pollWatcher) run() {
	for {
		select {
		case <-p.done:
			return
		case err, ok := <-p.w.fw.Errors:
			if !ok {
				return
			}
			p.mu.Lock()
			p.err = err
			p.mu.Unlock()
		case ev, ok := <-p.w.fw.Events:
			if !ok {
				return
			}
			if out := p.w.convert(ev); out != nil {
				p.mu.Lock()
				if len(p.events) < maxPolledEvents {
					p.events = append(p.events, out)
				}
				p.mu.Unlock()
			}
		}
	}
}

func (p *pollWatcher) close() {
	close(p.done)
	p.w.close()
}

func (f *filesystemService) CreateWatcher(_ context.Context, req *connect.Request[pb.CreateWatcherRequest]) (*connect.Response[pb.CreateWatcherResponse], error) {
	_, dir, err := f.target(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	f.s.mu.Lock()
	n := len(f.s.watchers)
	f.s.mu.Unlock()
	if n >= maxWatchers {
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%d watchers exist (the limit); remove one first", n))
	}
	w, err := newWatcher(dir, req.Msg.GetRecursive(), req.Msg.GetIncludeEntry())
	if err != nil {
		return nil, err
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	pw := &pollWatcher{w: w, done: make(chan struct{})}
	f.s.mu.Lock()
	f.s.watchers[id] = pw
	f.s.mu.Unlock()
	go pw.run()
	return connect.NewResponse(&pb.CreateWatcherResponse{WatcherId: id}), nil
}

func (f *filesystemService) poller(id string) (*pollWatcher, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	pw, ok := f.s.watchers[id]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher %q not found", id))
	}
	return pw, nil
}

func (f *filesystemService) GetWatcherEvents(_ context.Context, req *connect.Request[pb.GetWatcherEventsRequest]) (*connect.Response[pb.GetWatcherEventsResponse], error) {
	pw, err := f.poller(req.Msg.GetWatcherId())
	if err != nil {
		return nil, err
	}
	pw.mu.Lock()
	evs, werr := pw.events, pw.err
	pw.events, pw.err = nil, nil
	pw.mu.Unlock()
	if werr != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("watcher %s: %w", req.Msg.GetWatcherId(), werr))
	}
	return connect.NewResponse(&pb.GetWatcherEventsResponse{Events: evs}), nil
}

func (f *filesystemService) RemoveWatcher(_ context.Context, req *connect.Request[pb.RemoveWatcherRequest]) (*connect.Response[pb.RemoveWatcherResponse], error) {
	f.s.mu.Lock()
	pw, ok := f.s.watchers[req.Msg.GetWatcherId()]
	delete(f.s.watchers, req.Msg.GetWatcherId())
	f.s.mu.Unlock()
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher %q not found", req.Msg.GetWatcherId()))
	}
	pw.close()
	return connect.NewResponse(&pb.RemoveWatcherResponse{}), nil
}
