// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// Transactions asked at once are committed together, each on its own:
// every one that succeeds is kept and told so; one that fails leaves no
// write and does not undo the others'; one whose context ends while it
// runs (SQLite may roll back everything then) is refused, and the others
// are committed all the same.
func TestGroupCommit(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE t (k TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	insert := func(ctx context.Context, k string) func(*sql.Tx) error {
		return func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO t (k) VALUES (?)`, k)
			return err
		}
	}
	const n = 200
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			k := fmt.Sprint(i)
			switch i % 10 {
			case 3: // fails after its write
				errs[i] = s.tx(ctx, func(tx *sql.Tx) error {
					if err := insert(ctx, k)(tx); err != nil {
						return err
					}
					return errors.New("refused")
				})
			case 7: // its context ends after its write
				cctx, cancel := context.WithCancel(ctx)
				errs[i] = s.tx(cctx, func(tx *sql.Tx) error {
					if err := insert(cctx, k)(tx); err != nil {
						return err
					}
					cancel()
					_, err := tx.ExecContext(cctx, `INSERT INTO t (k) VALUES (?)`, k+"-late")
					return err
				})
			default:
				errs[i] = s.tx(ctx, insert(ctx, k))
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if (i%10 == 3 || i%10 == 7) != (err != nil) {
			t.Errorf("transaction %d: %v", i, err)
		}
	}
	rows, err := s.db.QueryContext(ctx, `SELECT k FROM t`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]bool{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		got[k] = true
	}
	for i := range n {
		if want := i%10 != 3 && i%10 != 7; got[fmt.Sprint(i)] != want {
			t.Errorf("row %d kept: %v, want %v", i, got[fmt.Sprint(i)], want)
		}
	}
	if len(got) != n-n/5 {
		t.Errorf("%d rows, want %d", len(got), n-n/5)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.tx(ctx, insert(ctx, "after")); !errors.Is(err, errClosed) {
		t.Errorf("a transaction after Close = %v", err)
	}
}
