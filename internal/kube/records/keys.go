// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package records

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/auth"
)

// LabelAPIKey marks the Secrets holding API keys (their hashes).
const LabelAPIKey = "corral.dev/api-key"

// Keys is an auth.SharedKeyStore in a namespace's Secrets: one per key,
// named after its hash (so a key is stored once however many servers
// seed it), holding the record with the key's SHA-256, never the key.
type Keys struct {
	*secrets
}

// NewKeys connects to the cluster and fills the cache before it returns.
func NewKeys(ctx context.Context, cfg Config) (*Keys, error) {
	s, err := openSecrets(ctx, cfg, LabelAPIKey)
	if err != nil {
		return nil, err
	}
	return &Keys{s}, nil
}

// keyName is the Secret of the key with this hash on this server: one per
// key and server, however many replicas seed it.
func (k *Keys) keyName(hash string) string { return "corral-key-" + digest(k.cfg.ServerID, hash) }

// InsertKey stores a new key; ErrAlreadyExists if its hash is known.
func (k *Keys) InsertKey(ctx context.Context, key *auth.APIKey) error {
	b, err := json.Marshal(key)
	if err != nil {
		return err
	}
	s := &corev1.Secret{ObjectMeta: k.meta(k.keyName(key.Hash), LabelAPIKey),
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"key": b}}
	if err := k.c.Create(ctx, s); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("insert key: %w", errdefs.ErrAlreadyExists)
		}
		return apiErr("store an API key", err)
	}
	return nil
}

func decodeKey(s *corev1.Secret) (*auth.APIKey, error) {
	var key auth.APIKey
	if err := json.Unmarshal(s.Data["key"], &key); err != nil {
		return nil, fmt.Errorf("API key %s: %w", s.Name, err)
	}
	return &key, nil
}

// LoadKeys returns every key, revoked ones included, oldest first, read
// from the API server (not the cache, which may lag another server's
// write by a moment): it runs at start, when a seed races another
// server's, and for an admin's listing.
func (k *Keys) LoadKeys(ctx context.Context) ([]*auth.APIKey, error) {
	l, err := k.list(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*auth.APIKey, 0, len(l.Items))
	for i := range l.Items {
		key, err := decodeKey(&l.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, key)
	}
	slices.SortFunc(out, func(a, b *auth.APIKey) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return compareStrings(a.ID, b.ID)
	})
	return out, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (k *Keys) list(ctx context.Context) (*corev1.SecretList, error) {
	var l corev1.SecretList
	if err := k.c.List(ctx, &l, client.InNamespace(k.cfg.Namespace), client.MatchingLabels(labels.Merge(k.ours, labels.Set{LabelAPIKey: "true"}))); err != nil {
		return nil, apiErr("list API keys", err)
	}
	return &l, nil
}

// RevokeKey marks a key revoked; revoking twice keeps the first time.
func (k *Keys) RevokeKey(ctx context.Context, id string, at time.Time) error {
	l, err := k.list(ctx)
	if err != nil {
		return err
	}
	for i := range l.Items {
		s := &l.Items[i]
		key, err := decodeKey(s)
		if err != nil || key.ID != id {
			continue
		}
		if !key.RevokedAt.IsZero() {
			return nil
		}
		key.RevokedAt = at
		b, err := json.Marshal(key)
		if err != nil {
			return err
		}
		s.Data["key"] = b
		if err := k.c.Update(ctx, s); err != nil {
			return apiErr("revoke API key "+id, err)
		}
		return nil
	}
	return fmt.Errorf("key %s: %w", id, errdefs.ErrNotFound)
}

// Follow calls changed with every key written, until ctx ends.
func (k *Keys) Follow(ctx context.Context, changed func(*auth.APIKey)) error {
	return k.follow(ctx, func(s *corev1.Secret) {
		if key, err := decodeKey(s); err == nil {
			changed(key)
		}
	}, func(s *corev1.Secret) {
		// A key whose Secret is deleted is revoked.
		if key, err := decodeKey(s); err == nil {
			if key.RevokedAt.IsZero() {
				key.RevokedAt = time.Now().UTC()
			}
			changed(key)
		}
	})
}
