// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// Headers of the execd API.
const (
	// HeaderCommandsTailCursor carries the next byte offset of a log read.
	HeaderCommandsTailCursor = "EXECD-COMMANDS-TAIL-CURSOR"
)

// Stream event types of the execd API.
const (
	EventInit              = "init"
	EventStatus            = "status"
	EventError             = "error"
	EventStdout            = "stdout"
	EventStderr            = "stderr"
	EventResult            = "result"
	EventExecutionComplete = "execution_complete"
	EventExecutionCount    = "execution_count"
	EventPing              = "ping"
	EventMetrics           = "metrics"
)

// ErrCommandExec is the ename of a command that exited non-zero or failed
// to start; its evalue is the decimal exit code (or the start error).
const ErrCommandExec = "CommandExecError"

// ServerStreamEvent is one event of an execd stream. Cursor is a corral
// extension, sent only when the client asks for cursors: the byte offset,
// in the command's combined output, just past the bytes of this event.
type ServerStreamEvent struct {
	Type           string         `json:"type"`
	Text           string         `json:"text,omitempty"`
	ExecutionCount int            `json:"execution_count,omitempty"`
	ExecutionTime  int64          `json:"execution_time,omitempty"`
	Timestamp      int64          `json:"timestamp"`
	Results        map[string]any `json:"results,omitempty"`
	Error          *ExecError     `json:"error,omitempty"`
	Cursor         *int64         `json:"cursor,omitempty"`
	// MainResult marks the result of the execution's value (Jupyter's
	// execute_result) as opposed to one it displayed; not on the wire
	// of OpenSandbox's routes (E2B's code interpreter sends it).
	MainResult bool `json:"-"`
}

// ExecError describes a failure in an error event. TracebackText is a
// corral extension: the traceback as one plain-text string, without the
// ANSI colour codes a kernel puts in Traceback.
type ExecError struct {
	EName         string   `json:"ename"`
	EValue        string   `json:"evalue"`
	Traceback     []string `json:"traceback"`
	TracebackText string   `json:"traceback_text,omitempty"`
}

// RunCommandRequest is the body of POST /command. Timeout is milliseconds.
type RunCommandRequest struct {
	Command    string            `json:"command"`
	Cwd        string            `json:"cwd,omitempty"`
	Background bool              `json:"background,omitempty"`
	Timeout    *int64            `json:"timeout,omitempty"`
	UID        *int64            `json:"uid,omitempty"`
	GID        *int64            `json:"gid,omitempty"`
	Envs       map[string]string `json:"envs,omitempty"`
}

// CommandStatusResponse is the body of GET /command/status/{id}.
type CommandStatusResponse struct {
	ID         string     `json:"id"`
	Content    string     `json:"content"`
	Running    bool       `json:"running"`
	ExitCode   *int       `json:"exit_code,omitempty"`
	Error      string     `json:"error,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// CreateSessionRequest is the optional body of POST /session.
type CreateSessionRequest struct {
	Cwd string `json:"cwd,omitempty"`
}

// CreateSessionResponse answers POST /session.
type CreateSessionResponse struct {
	SessionID string `json:"session_id"`
}

// RunInSessionRequest is the body of POST /session/{id}/run. Timeout is
// milliseconds.
type RunInSessionRequest struct {
	Command string `json:"command"`
	Cwd     string `json:"cwd,omitempty"`
	Timeout *int64 `json:"timeout,omitempty"`
}

// CodeContext is a code execution context. Cwd, Kernel, Status, Queued
// and CreatedAt are corral extensions, sent in answers only.
type CodeContext struct {
	ID       string `json:"id,omitempty"`
	Language string `json:"language"`
	Cwd      string `json:"cwd,omitempty"`
	// Kernel is the kernelspec the context runs (python3, ir, ...).
	Kernel string `json:"kernel,omitempty"`
	// Status is idle, busy or dead (the kernel exited; the context must
	// be restarted or deleted).
	Status string `json:"status,omitempty"`
	// Queued counts executions waiting behind the running one.
	Queued    int        `json:"queued,omitempty"`
	CreatedAt *time.Time `json:"created_at,omitempty"`
}

// Code context statuses.
const (
	CodeContextIdle = "idle"
	CodeContextBusy = "busy"
	CodeContextDead = "dead"
)

// CodeFilesKey is the results key of a result event whose MIME values
// were too large to send inline: its value is a JSON-encoded array of
// CodeFile, each naming the file in the sandbox that holds one value.
const CodeFilesKey = "corral.dev/files"

// CodeFile is one MIME value of a result written to a file in the
// sandbox. Binary types (image/png, ...) are written decoded.
type CodeFile struct {
	MIME string `json:"mime"`
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// CodeContextRequest is the body of POST /code/context.
type CodeContextRequest struct {
	Language string `json:"language,omitempty"`
	Cwd      string `json:"cwd,omitempty"`
}

// RunCodeRequest is the body of POST /code.
type RunCodeRequest struct {
	Context *CodeContext `json:"context,omitempty"`
	Code    string       `json:"code"`
}

// FileInfo describes a file. Mode is the permission bits written as octal
// digits in a decimal number (0644 is 644).
type FileInfo struct {
	Path       string    `json:"path"`
	Type       string    `json:"type"`
	Size       int64     `json:"size"`
	ModifiedAt time.Time `json:"modified_at"`
	CreatedAt  time.Time `json:"created_at"`
	Owner      string    `json:"owner"`
	Group      string    `json:"group"`
	Mode       int       `json:"mode"`
}

// File types in FileInfo.
const (
	FileTypeFile      = "file"
	FileTypeDirectory = "directory"
	FileTypeSymlink   = "symlink"
	FileTypeOther     = "other"
)

// Permission sets owner, group and mode (octal digits) of a path.
type Permission struct {
	Owner string `json:"owner,omitempty"`
	Group string `json:"group,omitempty"`
	Mode  int    `json:"mode"`
}

// FileMetadata describes one uploaded file.
type FileMetadata struct {
	Path  string `json:"path"`
	Owner string `json:"owner,omitempty"`
	Group string `json:"group,omitempty"`
	Mode  int    `json:"mode,omitempty"`
}

// RenameFileItem is one move of POST /files/mv.
type RenameFileItem struct {
	Src  string `json:"src"`
	Dest string `json:"dest"`
}

// ReplaceFileContentItem is one replacement of POST /files/replace.
type ReplaceFileContentItem struct {
	Old string `json:"old"`
	New string `json:"new"`
}

// ReplaceFileContentResult counts the replacements in one file.
type ReplaceFileContentResult struct {
	ReplacedCount int `json:"replacedCount"`
}

// Metrics are the sandbox's resource figures.
type Metrics struct {
	Type        string  `json:"type,omitempty"`
	CPUCount    float64 `json:"cpu_count"`
	CPUUsedPct  float64 `json:"cpu_used_pct"`
	MemTotalMiB float64 `json:"mem_total_mib"`
	MemUsedMiB  float64 `json:"mem_used_mib"`
	Timestamp   int64   `json:"timestamp"`
}

// Error codes of the execd API.
const (
	CodeExecdInvalidRequestBody = "INVALID_REQUEST_BODY"
	CodeExecdMissingQuery       = "MISSING_QUERY"
	CodeExecdRuntimeError       = "RUNTIME_ERROR"
	CodeExecdInvalidFile        = "INVALID_FILE"
	CodeExecdInvalidFileContent = "INVALID_FILE_CONTENT"
	CodeExecdInvalidFileMeta    = "INVALID_FILE_METADATA"
	CodeExecdFileNotFound       = "FILE_NOT_FOUND"
	CodeExecdUnknown            = "UNKNOWN"
	CodeExecdContextNotFound    = "CONTEXT_NOT_FOUND"
	CodeExecdNotSupported       = "NOT_SUPPORTED"
	CodeExecdUnauthorized       = "UNAUTHORIZED"
	CodeExecdCommandNotFound    = "COMMAND_NOT_FOUND"
	CodeExecdSessionNotFound    = "SESSION_NOT_FOUND"
	CodeExecdInvalidPath        = "INVALID_PATH"
	CodeExecdRangeNotSatisfied  = "RANGE_NOT_SATISFIABLE"
	CodeExecdAlreadyConnected   = "ALREADY_CONNECTED"
	CodeExecdContextBusy        = "CONTEXT_BUSY"
	CodeExecdContextDead        = "CONTEXT_DEAD"
	CodeExecdKernelFailed       = "KERNEL_FAILED"
	CodeExecdRouteNotFound      = "NOT_FOUND"
	CodeExecdPermissionDenied   = "PERMISSION_DENIED"
	CodeExecdNoSpace            = "NO_SPACE"
	CodeExecdReadOnly           = "READ_ONLY"
	CodeExecdFileExists         = "FILE_EXISTS"
	CodeExecdProxyUpstream      = "PROXY_UPSTREAM_UNREACHABLE"
)

// AppendJSON appends the event's JSON to b, as encoding/json would write
// it, without reflection: streams send many events.
func (e *ServerStreamEvent) AppendJSON(b []byte) []byte {
	b = append(b, `{"type":`...)
	b = AppendJSONString(b, e.Type)
	if e.Text != "" {
		b = append(b, `,"text":`...)
		b = AppendJSONString(b, e.Text)
	}
	if e.ExecutionCount != 0 {
		b = append(b, `,"execution_count":`...)
		b = strconv.AppendInt(b, int64(e.ExecutionCount), 10)
	}
	if e.ExecutionTime != 0 {
		b = append(b, `,"execution_time":`...)
		b = strconv.AppendInt(b, e.ExecutionTime, 10)
	}
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendInt(b, e.Timestamp, 10)
	if e.Results != nil {
		r, _ := json.Marshal(e.Results)
		b = append(b, `,"results":`...)
		b = append(b, r...)
	}
	if e.Error != nil {
		r, _ := json.Marshal(e.Error)
		b = append(b, `,"error":`...)
		b = append(b, r...)
	}
	if e.Cursor != nil {
		b = append(b, `,"cursor":`...)
		b = strconv.AppendInt(b, *e.Cursor, 10)
	}
	return append(b, '}')
}

// AppendJSONString appends s as a JSON string, escaped exactly as
// encoding/json escapes it with HTML escaping off; invalid UTF-8 becomes
// U+FFFD. It takes bytes too, so output can be encoded without copies.
func AppendJSONString[T string | []byte](b []byte, s T) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Skip plain ASCII bytes sixteen, then eight, at a time: no
		// control character, quote, backslash or non-ASCII byte among
		// them. Each word is one load (the compiler combines the bytes).
		for i+16 <= len(s) {
			_ = s[i+15]
			x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
				uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
			y := uint64(s[i+8]) | uint64(s[i+9])<<8 | uint64(s[i+10])<<16 | uint64(s[i+11])<<24 |
				uint64(s[i+12])<<32 | uint64(s[i+13])<<40 | uint64(s[i+14])<<48 | uint64(s[i+15])<<56
			if !plainWord(x) || !plainWord(y) {
				break
			}
			i += 16
		}
		for i+8 <= len(s) {
			_ = s[i+7]
			x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
				uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
			if !plainWord(x) {
				break
			}
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := decodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func decodeRune[T string | []byte](s T) (rune, int) {
	switch v := any(s).(type) {
	case string:
		return utf8.DecodeRuneInString(v)
	case []byte:
		return utf8.DecodeRune(v)
	}
	return utf8.RuneError, 1
}

const hexDigits = "0123456789abcdef"

// plainWord reports whether none of the 8 bytes of x needs escaping in a
// JSON string (and none is part of a multi-byte UTF-8 sequence).
func plainWord(x uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	hasLess := func(x uint64, n uint64) uint64 { return (x - lo*n) & ^x & hi }
	hasZero := func(x uint64) uint64 { return (x - lo) & ^x & hi }
	return x&hi == 0 && hasLess(x, 0x20) == 0 && hasZero(x^(lo*'"')) == 0 && hasZero(x^(lo*'\\')) == 0
}

// PathExecdActivity is corral's execd route that tells the server when
// the sandbox was last used (GET): its idle policy reads it.
const PathExecdActivity = "/corral/activity"

// PathExecdE2BEnvd and PathExecdE2BCode are the prefixes under which
// execd serves E2B's envd protocol and its code interpreter's: the
// server forwards E2B clients' requests for a sandbox's ports 49983 and
// 49999 there.
const (
	PathExecdE2BEnvd = "/corral/e2b/envd"
	PathExecdE2BCode = "/corral/e2b/code"
)

// PathExecdCommands is corral's execd route that lists the commands
// execd keeps, the newest first (GET, ?limit= 1–200, default 50, and
// ?offset=): the console's command history. Each one's output is at
// /command/{id}/logs.
const PathExecdCommands = "/corral/commands"

// CommandList answers GET /corral/commands.
type CommandList struct {
	Items []CommandSummary `json:"items"`
	// Total is how many commands execd keeps.
	Total int `json:"total"`
}

// CommandSummary is one kept command.
type CommandSummary struct {
	CommandStatusResponse
	Background bool `json:"background"`
	// OutputBytes is the size of its combined output so far.
	OutputBytes int64 `json:"output_bytes"`
}

// ExecdActivity answers GET /corral/activity: the end of the last
// request execd served (other than /ping and this), how many requests
// and streams are open, and how many commands run.
type ExecdActivity struct {
	LastActivity time.Time `json:"lastActivity"`
	InFlight     int64     `json:"inFlight"`
	Running      int       `json:"running"`
}
