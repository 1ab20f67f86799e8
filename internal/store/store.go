// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package store persists corral's state in SQLite (modernc.org/sqlite, pure
// Go, WAL, synchronous=FULL so that a committed create survives even an
// operating-system crash): sandboxes with their driver handles, snapshots,
// idempotency keys, hashed API keys and the event log. The schema is
// migrated by embedded, versioned SQL files. *Store is the single writer of
// its database. It implements the contracts of its users in their own
// types (lifecycle.LocalStore, auth.KeyStore, secrets.Store); only the
// composition root (`corral serve`) imports it (internal/archtest checks).
package store

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/sandbox"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is corral's state database.
type Store struct {
	db *sql.DB
	// txq takes transactions to the committer (commitLoop), which runs
	// those waiting together in one database transaction: one sync to
	// disk for all of them.
	txq      chan *txReq
	closed   chan struct{}
	loopDone chan struct{}
	once     sync.Once

	// mu guards the audit events appended since they were last trimmed:
	// per sandbox, and in all.
	mu         sync.Mutex
	auditSince map[string]int
	auditTotal int
}

// Open opens (creating if needed) the database at path and migrates it.
func Open(ctx context.Context, path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "synchronous(FULL)", "busy_timeout(10000)", "foreign_keys(1)"} {
		q.Add("_pragma", p)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	// One connection: SQLite has one writer, and this keeps every statement
	// of the process serialized without SQLITE_BUSY.
	db.SetMaxOpenConns(1)
	s := &Store{db: db, txq: make(chan *txReq, maxBatch), closed: make(chan struct{}), loopDone: make(chan struct{})}
	go s.commitLoop()
	if err := s.migrate(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	return s, nil
}

// Close stops the committer and closes the database.
func (s *Store) Close() error {
	s.once.Do(func() {
		close(s.closed)
		<-s.loopDone
	})
	return s.db.Close()
}

func (s *Store) migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var current int
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&current)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	entries, err := fs.ReadDir(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	latest := 0
	for _, e := range entries {
		v, err := strconv.Atoi(strings.SplitN(e.Name(), "_", 2)[0])
		if err != nil {
			return fmt.Errorf("migrate: bad migration name %q", e.Name())
		}
		latest = max(latest, v)
		if v <= current {
			continue
		}
		body, err := migrations.ReadFile("migrations/" + e.Name())
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		err = s.tx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, string(body)); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (?)`, v)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate to version %d: %w", v, err)
		}
	}
	if current > latest {
		return fmt.Errorf("the database has schema version %d but this binary knows only up to %d: use a newer corral", current, latest)
	}
	return nil
}

func (s *Store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	r := &txReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case s.txq <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.closed:
		return errClosed
	}
	// Once queued, fn may run: wait for its outcome whatever ctx does,
	// unless the committer is gone (the store closed meanwhile).
	select {
	case err := <-r.done:
		return err
	case <-s.loopDone:
		select {
		case err := <-r.done:
			return err
		default:
			return errClosed
		}
	}
}

// errClosed answers a transaction asked of a closed store.
var errClosed = errors.New("store: closed")

// maxBatch bounds the transactions committed together.
const maxBatch = 64

// txReq is a transaction waiting for the committer.
type txReq struct {
	ctx  context.Context
	fn   func(*sql.Tx) error
	done chan error
}

// commitLoop commits the transactions asked of the store: each batch of
// those waiting (while one commits, the next gather) runs in one database
// transaction, each in a savepoint of its own, so one that fails leaves
// the others' writes; the commit (the sync to disk) is shared, and each
// caller hears of it only once it is done. With one connection, positions
// given by AUTOINCREMENT still become readable all at once, in order.
func (s *Store) commitLoop() {
	defer close(s.loopDone)
	for {
		var batch []*txReq
		select {
		case r := <-s.txq:
			batch = append(batch, r)
		case <-s.closed:
			for {
				select {
				case r := <-s.txq:
					r.done <- errClosed
				default:
					return
				}
			}
		}
	more:
		for len(batch) < maxBatch {
			select {
			case r := <-s.txq:
				batch = append(batch, r)
			default:
				break more
			}
		}
		s.commitBatch(batch)
	}
}

// commitBatch runs batch in one transaction and tells each its outcome.
// A transaction whose context ended while it ran may have had SQLite roll
// back the whole database transaction (an interrupted write does): it is
// answered with its error, and the others run again in a new one.
func (s *Store) commitBatch(batch []*txReq) {
	errs := make([]error, len(batch))
	tx, err := s.db.BeginTx(context.Background(), nil)
	if err != nil {
		for _, r := range batch {
			r.done <- err
		}
		return
	}
	ran := 0
	for i, r := range batch {
		if errs[i] = r.ctx.Err(); errs[i] != nil {
			continue
		}
		if _, errs[i] = tx.Exec(`SAVEPOINT batch`); errs[i] != nil {
			continue
		}
		if errs[i] = r.fn(tx); errs[i] != nil && r.ctx.Err() != nil {
			_ = tx.Rollback()
			r.done <- errs[i]
			var again []*txReq
			for j, o := range batch {
				if j != i && (j > i || errs[j] == nil) {
					again = append(again, o)
				} else if j < i {
					o.done <- errs[j]
				}
			}
			if len(again) > 0 {
				s.commitBatch(again)
			}
			return
		}
		if errs[i] != nil {
			if _, err := tx.Exec(`ROLLBACK TO batch`); err != nil {
				errs[i] = errors.Join(errs[i], err)
			}
		} else {
			ran++
		}
		if _, err := tx.Exec(`RELEASE batch`); err != nil && errs[i] == nil {
			errs[i] = err
		}
	}
	if ran == 0 {
		err = tx.Rollback()
	} else {
		err = tx.Commit()
	}
	for i, r := range batch {
		if errs[i] == nil && err != nil {
			errs[i] = err
		}
		r.done <- errs[i]
	}
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func nullNanos(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixNano(), Valid: true}
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func nullString(s string) sql.NullString {
	return sql.NullString{String: s, Valid: s != ""}
}

// mustJSON encodes the string maps and slices of a record, which cannot fail.
func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Bounds of the audit events (types "egress.*", "secret.*"): each
// sandbox keeps its newest MaxAuditPerSandbox, so one sandbox's flood
// evicts only its own; MaxAuditEvents bounds all of them together, the
// database's size. Trims run every tenth of a bound's inserts, so a count
// may pass its bound by that much.
const (
	MaxAuditPerSandbox = 10_000
	MaxAuditEvents     = 2_000_000
)

// auditTypes is the SQL condition of an audit event.
const auditTypes = `(type LIKE 'egress.%' OR type LIKE 'secret.%')`

func insertEvent(ctx context.Context, tx *sql.Tx, ev *sandbox.Event) error {
	if ev == nil {
		return nil
	}
	var md string
	if len(ev.Metadata) > 0 {
		md = mustJSON(ev.Metadata)
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO events (at, tenant, sandbox_id, type, state, reason, message, detail, kind, metadata) VALUES (?,?,?,?,?,?,?,?,?,?)`,
		nanos(ev.At), ev.Tenant, ev.SandboxID, ev.Type, ev.State, ev.Reason, ev.Message, ev.Detail, ev.Kind, md)
	if err != nil {
		return err
	}
	ev.Seq, err = res.LastInsertId()
	return err
}

// AppendAudit adds audit events in one transaction and trims the oldest
// of a sandbox beyond MaxAuditPerSandbox, and of all beyond
// MaxAuditEvents.
func (s *Store) AppendAudit(ctx context.Context, evs []sandbox.Event) error {
	if len(evs) == 0 {
		return nil
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		per := map[string]int{}
		for i := range evs {
			if err := insertEvent(ctx, tx, &evs[i]); err != nil {
				return err
			}
			per[evs[i].SandboxID]++
		}
		trim, all := s.dueTrims(per)
		for _, id := range trim {
			if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE sandbox_id = ? AND `+auditTypes+` AND seq <
				(SELECT seq FROM events WHERE sandbox_id = ? AND `+auditTypes+` ORDER BY seq DESC LIMIT 1 OFFSET ?)`,
				id, id, MaxAuditPerSandbox-1); err != nil {
				return fmt.Errorf("trim: %w", err)
			}
		}
		if all {
			if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE `+auditTypes+` AND seq <= (SELECT MAX(seq) FROM events) - ?`, MaxAuditEvents); err != nil {
				return fmt.Errorf("trim: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

// dueTrims counts appended audit events and returns the sandboxes whose
// audit is due a trim, and whether all of it is.
func (s *Store) dueTrims(per map[string]int) ([]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.auditSince == nil {
		s.auditSince = map[string]int{}
	}
	var due []string
	total := 0
	for id, n := range per {
		total += n
		if s.auditSince[id] += n; s.auditSince[id] >= MaxAuditPerSandbox/10 {
			due = append(due, id)
			delete(s.auditSince, id)
		}
	}
	s.auditTotal += total
	all := s.auditTotal >= MaxAuditEvents/10
	if all {
		// Forget sandboxes that have gone quiet, so the map stays small.
		s.auditSince, s.auditTotal = map[string]int{}, 0
	}
	return due, all
}

// Events returns up to limit events after seq, oldest first; sandboxID
// and typePrefix (such as "egress") filter when not empty.
func (s *Store) Events(ctx context.Context, sandboxID string, after int64, limit int, typePrefix string) ([]sandbox.Event, error) {
	q := `SELECT ` + eventColumns + ` FROM events WHERE seq > ?`
	args := []any{after}
	if sandboxID != "" {
		q += ` AND sandbox_id = ?`
		args = append(args, sandboxID)
	}
	if typePrefix != "" {
		q += ` AND (type = ? OR substr(type, 1, ?) = ?)`
		args = append(args, typePrefix, len(typePrefix)+1, typePrefix+".")
	}
	q += ` ORDER BY seq LIMIT ?`
	args = append(args, limit)
	return s.queryEvents(ctx, q, args)
}

const sandboxColumns = `id, tenant, state, reason, message, last_transition_at, created_at, updated_at, expires_at,
	driver, image_uri, snapshot_id, platform_os, platform_arch, entrypoint, metadata, resources, extensions,
	network_policy, handle, execd_token, egress_token`

func sandboxArgs(sb *sandbox.Sandbox) []any {
	var img, pos, parch string
	if sb.Image != nil {
		img = sb.Image.URI
	}
	if sb.Platform != nil {
		pos, parch = sb.Platform.OS, sb.Platform.Arch
	}
	return []any{
		sb.ID, sb.Tenant, sb.Status.State.String(), sb.Status.Reason, sb.Status.Message,
		nanos(sb.Status.LastTransitionAt), nanos(sb.CreatedAt), nanos(sb.UpdatedAt), nullNanos(sb.ExpiresAt),
		sb.Driver, nullString(img), nullString(sb.SnapshotID), nullString(pos), nullString(parch),
		mustJSON(nonNilSlice(sb.Entrypoint)), mustJSON(nonNilMap(sb.Metadata)), mustJSON(nonNilMap(sb.Resources.Map())),
		mustJSON(nonNilMap(sb.Extensions)), nullString(string(sb.NetworkPolicy)), nullString(string(sb.Handle)),
		string(sb.ExecdToken), string(sb.EgressToken),
	}
}

func nonNilSlice(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// InsertSandbox writes a new sandbox record, its idempotency key (if any)
// and an event in one transaction. If the tenant already used the key, it
// writes nothing and returns the existing binding with ErrAlreadyExists.
func (s *Store) InsertSandbox(ctx context.Context, sb *sandbox.Sandbox, idem *sandbox.Idempotency, ev *sandbox.Event) (*sandbox.Idempotency, error) {
	var existing *sandbox.Idempotency
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if idem != nil {
			prev, err := lookupIdempotency(ctx, tx, idem.Tenant, idem.Key)
			if err == nil {
				existing = prev
				return fmt.Errorf("idempotency key %q: %w", idem.Key, errdefs.ErrAlreadyExists)
			}
			if !errors.Is(err, errdefs.ErrNotFound) {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO idempotency_keys (tenant, key, request_hash, sandbox_id, created_at) VALUES (?,?,?,?,?)`,
				idem.Tenant, idem.Key, idem.RequestHash, idem.SandboxID, nanos(idem.CreatedAt)); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO sandboxes (`+sandboxColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`, sandboxArgs(sb)...); err != nil {
			return err
		}
		return insertEvent(ctx, tx, ev)
	})
	if err != nil {
		return existing, fmt.Errorf("insert sandbox %s: %w", sb.ID, err)
	}
	return nil, nil
}

// UpdateSandbox rewrites a sandbox record and appends ev, atomically.
func (s *Store) UpdateSandbox(ctx context.Context, sb *sandbox.Sandbox, ev *sandbox.Event) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		args := sandboxArgs(sb)
		res, err := tx.ExecContext(ctx, `UPDATE sandboxes SET tenant=?, state=?, reason=?, message=?, last_transition_at=?, created_at=?,
			updated_at=?, expires_at=?, driver=?, image_uri=?, snapshot_id=?, platform_os=?, platform_arch=?, entrypoint=?, metadata=?,
			resources=?, extensions=?, network_policy=?, handle=?, execd_token=?, egress_token=? WHERE id=?`, append(args[1:], args[0])...)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("sandbox %s: %w", sb.ID, errdefs.ErrNotFound)
		}
		return insertEvent(ctx, tx, ev)
	})
	if err != nil {
		return fmt.Errorf("update sandbox %s: %w", sb.ID, err)
	}
	return nil
}

// DeleteSandbox removes a sandbox record and appends ev, atomically.
// Deleting an unknown sandbox is not an error.
func (s *Store) DeleteSandbox(ctx context.Context, id string, ev *sandbox.Event) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM sandboxes WHERE id=?`, id); err != nil {
			return err
		}
		return insertEvent(ctx, tx, ev)
	})
	if err != nil {
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	return nil
}

// LoadSandboxes returns every sandbox record.
func (s *Store) LoadSandboxes(ctx context.Context) ([]*sandbox.Sandbox, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+sandboxColumns+` FROM sandboxes ORDER BY created_at`)
	if err != nil {
		return nil, fmt.Errorf("load sandboxes: %w", err)
	}
	defer rows.Close()
	var out []*sandbox.Sandbox
	for rows.Next() {
		sb, err := scanSandbox(rows)
		if err != nil {
			return nil, fmt.Errorf("load sandboxes: %w", err)
		}
		out = append(out, sb)
	}
	return out, rows.Err()
}

func scanSandbox(rows *sql.Rows) (*sandbox.Sandbox, error) {
	var (
		sb                                    sandbox.Sandbox
		state                                 string
		lta, created, updated                 int64
		expires                               sql.NullInt64
		img, snap, pos, parch, policy, handle sql.NullString
		entry, md, res, ext                   string
		execd, egress                         string
	)
	if err := rows.Scan(&sb.ID, &sb.Tenant, &state, &sb.Status.Reason, &sb.Status.Message, &lta, &created, &updated, &expires,
		&sb.Driver, &img, &snap, &pos, &parch, &entry, &md, &res, &ext, &policy, &handle, &execd, &egress); err != nil {
		return nil, err
	}
	st, err := sandbox.ParseState(state)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", sb.ID, err)
	}
	sb.Status.State = st
	sb.Status.LastTransitionAt, sb.CreatedAt, sb.UpdatedAt = fromNanos(lta), fromNanos(created), fromNanos(updated)
	if expires.Valid {
		sb.ExpiresAt = fromNanos(expires.Int64)
	}
	if img.Valid {
		sb.Image = &sandbox.Image{URI: img.String}
	}
	sb.SnapshotID = snap.String
	if pos.Valid || parch.Valid {
		sb.Platform = &sandbox.Platform{OS: pos.String, Arch: parch.String}
	}
	var resMap map[string]string
	for _, f := range []struct {
		src string
		dst any
	}{{entry, &sb.Entrypoint}, {md, &sb.Metadata}, {res, &resMap}, {ext, &sb.Extensions}} {
		if err := json.Unmarshal([]byte(f.src), f.dst); err != nil {
			return nil, fmt.Errorf("sandbox %s: %w", sb.ID, err)
		}
	}
	if sb.Resources, err = sandbox.ParseResources(resMap); err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", sb.ID, err)
	}
	if len(sb.Metadata) == 0 {
		sb.Metadata = nil
	}
	if len(sb.Extensions) == 0 {
		sb.Extensions = nil
	}
	if policy.Valid {
		sb.NetworkPolicy = json.RawMessage(policy.String)
	}
	if handle.Valid {
		sb.Handle = json.RawMessage(handle.String)
	}
	sb.ExecdToken, sb.EgressToken = sandbox.Token(execd), sandbox.Token(egress)
	return &sb, nil
}

func lookupIdempotency(ctx context.Context, tx *sql.Tx, tenant, key string) (*sandbox.Idempotency, error) {
	var i sandbox.Idempotency
	var created int64
	err := tx.QueryRowContext(ctx, `SELECT tenant, key, request_hash, sandbox_id, created_at FROM idempotency_keys WHERE tenant=? AND key=?`,
		tenant, key).Scan(&i.Tenant, &i.Key, &i.RequestHash, &i.SandboxID, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("idempotency key %q: %w", key, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	i.CreatedAt = fromNanos(created)
	return &i, nil
}

// LookupIdempotency returns the binding of a tenant's key; ErrNotFound if none.
func (s *Store) LookupIdempotency(ctx context.Context, tenant, key string) (*sandbox.Idempotency, error) {
	var out *sandbox.Idempotency
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = lookupIdempotency(ctx, tx, tenant, key)
		return err
	})
	return out, err
}

// ReleaseIdempotency forgets a tenant's key if it is still bound to
// sandboxID, so that the next request with it creates anew.
func (s *Store) ReleaseIdempotency(ctx context.Context, tenant, key, sandboxID string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE tenant = ? AND key = ? AND sandbox_id = ?`, tenant, key, sandboxID)
	if err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}

// PurgeIdempotency forgets keys created before t.
func (s *Store) PurgeIdempotency(ctx context.Context, before time.Time) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE created_at < ?`, nanos(before))
	if err != nil {
		return fmt.Errorf("purge idempotency keys: %w", err)
	}
	return nil
}
