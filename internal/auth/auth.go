// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package auth owns API keys and the tenants they belong to: minting keys
// (only their SHA-256 is stored), authenticating a presented key in constant
// time against an in-memory index, listing and revoking keys, and the
// bootstrap admin key of a fresh server. The server and the CLI's serve
// command use it; it persists through a KeyStore (SQLite's, or the
// cluster's).
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

// KeyPrefix starts every key corral mints, so leaked keys are easy to find.
const KeyPrefix = "ck_"

// DefaultTenant owns the bootstrap admin key.
const DefaultTenant = "default"

// Principal is who a request acts as.
type Principal struct {
	Tenant string
	KeyID  string
	Admin  bool
}

// KeyStore keeps API keys: *store.Store (SQLite) or a store shared by
// several servers (SharedKeyStore).
type KeyStore interface {
	// InsertKey stores a new key; ErrAlreadyExists if its hash is known.
	InsertKey(ctx context.Context, k *APIKey) error
	// LoadKeys returns every key, revoked ones included, oldest first.
	LoadKeys(ctx context.Context) ([]*APIKey, error)
	// RevokeKey marks a key revoked; ErrNotFound if unknown.
	RevokeKey(ctx context.Context, id string, at time.Time) error
}

// SharedKeyStore is a KeyStore other servers write too: the Keyring
// follows every change, so a key created or revoked through one server
// holds on all of them within a watch's delay.
type SharedKeyStore interface {
	KeyStore
	// Follow calls changed with every key written, by any server, until
	// ctx ends; it returns once the handler is registered.
	Follow(ctx context.Context, changed func(*APIKey)) error
}

// Keyring authenticates API keys and manages them.
type Keyring struct {
	st KeyStore

	// mu guards byHash, which indexes active keys by the hex SHA-256 of the
	// key, and revoked, the hashes seen revoked (never active again).
	mu      sync.RWMutex
	byHash  map[string]*APIKey
	revoked map[string]bool
	// revokeMu serializes revocations, so the last-admin check holds
	// within this server (servers sharing a store check each their own).
	revokeMu sync.Mutex
}

// Open loads the keys from the store; a shared store is followed until
// ctx ends.
func Open(ctx context.Context, st KeyStore) (*Keyring, error) {
	k := &Keyring{st: st, byHash: map[string]*APIKey{}, revoked: map[string]bool{}}
	if sh, ok := st.(SharedKeyStore); ok {
		if err := sh.Follow(ctx, k.take); err != nil {
			return nil, err
		}
	}
	keys, err := st.LoadKeys(ctx)
	if err != nil {
		return nil, err
	}
	for _, key := range keys {
		k.take(key)
	}
	return k, nil
}

// take indexes an active key and forgets a revoked one. A revocation is
// final: an older read that still shows the key active (a load racing a
// followed change) does not bring it back.
func (k *Keyring) take(key *APIKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case !key.RevokedAt.IsZero():
		k.revoked[key.Hash] = true
		delete(k.byHash, key.Hash)
	case !k.revoked[key.Hash]:
		k.byHash[key.Hash] = key
	}
}

// Hash returns the stored form of a key.
func Hash(key string) string {
	h := hashOf(key)
	return string(h[:])
}

// hashOf is Hash's form in an array, which stays on the stack of a caller
// that only compares it (Authenticate, on every request).
func hashOf(key string) [2 * sha256.Size]byte {
	sum := sha256.Sum256([]byte(key))
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	return h
}

// Authenticate returns the principal of an active key, or
// ErrUnauthenticated. The comparison does not depend on how much of the
// key matches.
func (k *Keyring) Authenticate(key string) (Principal, error) {
	h := hashOf(key)
	k.mu.RLock()
	rec, ok := k.byHash[string(h[:])]
	k.mu.RUnlock()
	if !ok || subtle.ConstantTimeCompare([]byte(rec.Hash), h[:]) != 1 {
		return Principal{}, errdefs.New(errdefs.ErrUnauthenticated, api.CodeInvalidAPIKey,
			"Authentication credentials are invalid. Check your API key and try again.")
	}
	return Principal{Tenant: rec.Tenant, KeyID: rec.ID, Admin: rec.Admin}, nil
}

// Empty reports whether no active key exists.
func (k *Keyring) Empty() bool {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return len(k.byHash) == 0
}

// ValidateTenant checks a tenant name: 1 to 63 of [a-z0-9._-], starting with
// a letter or digit.
func ValidateTenant(t string) error {
	if t == "" || len(t) > 63 {
		return errdefs.New(errdefs.ErrInvalidArgument, api.CodeKeyInvalidTenant, "tenant must be 1 to 63 characters")
	}
	for i, c := range t {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '-' || c == '_' || c == '.')
		if !ok {
			return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeKeyInvalidTenant,
				"tenant %q: use lower-case letters, digits, '-', '_' and '.', starting with a letter or digit", t)
		}
	}
	return nil
}

// Create mints a key for tenant and returns it with its record. The key is
// returned only here.
func (k *Keyring) Create(ctx context.Context, tenant, name string, admin bool) (string, *APIKey, error) {
	if err := ValidateTenant(tenant); err != nil {
		return "", nil, err
	}
	if len(name) > 200 {
		return "", nil, errdefs.New(errdefs.ErrInvalidArgument, api.CodeKeyInvalidName, "name is longer than 200 characters")
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, err
	}
	key := KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	rec, err := k.add(ctx, key, tenant, name, admin)
	return key, rec, err
}

// Seed adds a given key (from --api-key) as an admin key of the default
// tenant if it is not known yet. It is idempotent.
func (k *Keyring) Seed(ctx context.Context, key string) error {
	if len(key) < 16 {
		return errdefs.New(errdefs.ErrInvalidArgument, api.CodeKeyTooShort, "an API key must be at least 16 characters")
	}
	k.mu.RLock()
	_, known := k.byHash[Hash(key)]
	k.mu.RUnlock()
	if known {
		return nil
	}
	_, err := k.add(ctx, key, DefaultTenant, "seeded", true)
	if errors.Is(err, errdefs.ErrAlreadyExists) {
		// Another server sharing the keys may have seeded it first; a key
		// that was revoked stays refused.
		keys, lerr := k.st.LoadKeys(ctx)
		if lerr != nil {
			return lerr
		}
		for _, rec := range keys {
			if rec.Hash == Hash(key) && rec.RevokedAt.IsZero() {
				k.take(rec)
				return nil
			}
		}
	}
	return err
}

func (k *Keyring) add(ctx context.Context, key, tenant, name string, admin bool) (*APIKey, error) {
	var id [6]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	rec := &APIKey{
		ID: "key_" + hex.EncodeToString(id[:]), Tenant: tenant, Name: name, Hash: Hash(key),
		Prefix: key[:min(len(key), 10)], Admin: admin, CreatedAt: time.Now().UTC(),
	}
	if err := k.st.InsertKey(ctx, rec); err != nil {
		return nil, err
	}
	k.mu.Lock()
	k.byHash[rec.Hash] = rec
	k.mu.Unlock()
	return rec, nil
}

// List returns every key, revoked ones included, without their hashes.
func (k *Keyring) List(ctx context.Context) ([]*APIKey, error) {
	keys, err := k.st.LoadKeys(ctx)
	if err != nil {
		return nil, err
	}
	for _, key := range keys {
		key.Hash = ""
	}
	return keys, nil
}

// Revoke revokes a key at once. Revoking the last active admin key is
// refused, so the server cannot lock its operators out.
func (k *Keyring) Revoke(ctx context.Context, id string) error {
	k.revokeMu.Lock()
	defer k.revokeMu.Unlock()
	// Checked under the lock, stored without it: a slow store must not
	// hold up every request's authentication.
	k.mu.RLock()
	var target *APIKey
	admins := 0
	for _, rec := range k.byHash {
		if rec.Admin {
			admins++
		}
		if rec.ID == id {
			target = rec
		}
	}
	k.mu.RUnlock()
	if _, shared := k.st.(SharedKeyStore); shared && target != nil && target.Admin {
		// Other servers revoke too: count the admins the store holds now
		// rather than what this server has heard of (narrows, does not
		// close, the race of two servers revoking the last two at once).
		keys, err := k.st.LoadKeys(ctx)
		if err != nil {
			return err
		}
		admins = 0
		for _, rec := range keys {
			if rec.Admin && rec.RevokedAt.IsZero() {
				admins++
			}
		}
	}
	if target != nil && target.Admin && admins == 1 {
		return errdefs.New(errdefs.ErrFailedPrecondition, api.CodeKeyLastAdmin,
			"this is the last active admin key; create another admin key before revoking it")
	}
	if err := k.st.RevokeKey(ctx, id, time.Now().UTC()); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return errdefs.Wrap(errdefs.ErrNotFound, api.CodeKeyNotFound, fmt.Sprintf("key %s not found", id), err)
		}
		return err
	}
	if target != nil {
		k.mu.Lock()
		k.revoked[target.Hash] = true
		delete(k.byHash, target.Hash)
		k.mu.Unlock()
	}
	return nil
}
