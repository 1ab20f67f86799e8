// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package records

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/corral-dev/corral/internal/quota"
)

// LabelClaims marks the Secrets holding a tenant's admission claims.
const LabelClaims = "corral.dev/claims"

// claimsName is the Secret of a tenant's claims on this server.
func (r *Records) claimsName(tenant string) string {
	return "corral-claims-" + digest(r.cfg.ServerID, tenant)
}

// mutateClaims changes a tenant's claims by compare and swap, dropping
// those older than quota.ClaimTTL; f returns the next claims, or
// errNoChange.
func (r *Records) mutateClaims(ctx context.Context, tenant string, f func([]quota.Claim) ([]quota.Claim, error)) error {
	name := r.claimsName(tenant)
	return r.claims.mutate(ctx, name, LabelClaims, nil, func(data map[string][]byte) (map[string][]byte, error) {
		var cs []quota.Claim
		if data != nil {
			if err := json.Unmarshal(data["claims"], &cs); err != nil {
				return nil, fmt.Errorf("claims %s: %w", name, err)
			}
		}
		cutoff := time.Now().Add(-quota.ClaimTTL)
		live := slices.DeleteFunc(slices.Clone(cs), func(c quota.Claim) bool { return c.At.Before(cutoff) })
		next, err := f(live)
		if errors.Is(err, errNoChange) && len(live) < len(cs) {
			next, err = live, nil // still write: the expired go
		}
		if err != nil {
			return nil, err
		}
		if len(next) == 0 {
			return nil, errRemove
		}
		b, err := json.Marshal(next)
		if err != nil {
			return nil, err
		}
		return map[string][]byte{"claims": b}, nil
	})
}

// Claim adds c to tenant's claims if admit passes them (every claim of
// the tenant's made within quota.ClaimTTL, by any server). Claims of
// a tenant are one Secret written by compare and swap: two servers'
// claims are checked one after the other, never side by side.
func (r *Records) Claim(ctx context.Context, tenant string, c quota.Claim, admit func(others []quota.Claim) error) error {
	var refused error
	err := r.mutateClaims(ctx, tenant, func(cs []quota.Claim) ([]quota.Claim, error) {
		others := slices.DeleteFunc(slices.Clone(cs), func(o quota.Claim) bool { return o.ID == c.ID })
		if refused = admit(others); refused != nil {
			return nil, errNoChange
		}
		return append(others, c), nil
	})
	if err != nil {
		return err
	}
	return refused
}

// Rebind gives tenant's claim from the sandbox ID to (a create that took
// a warm sandbox of another ID).
func (r *Records) Rebind(ctx context.Context, tenant, from, to string) error {
	return r.mutateClaims(ctx, tenant, func(cs []quota.Claim) ([]quota.Claim, error) {
		i := slices.IndexFunc(cs, func(c quota.Claim) bool { return c.ID == from })
		if i < 0 {
			return nil, errNoChange
		}
		cs[i].ID = to
		return cs, nil
	})
}

// Unclaim drops tenant's claim for id (its request failed before a
// record held the room).
func (r *Records) Unclaim(ctx context.Context, tenant, id string) error {
	return r.mutateClaims(ctx, tenant, func(cs []quota.Claim) ([]quota.Claim, error) {
		n := len(cs)
		cs = slices.DeleteFunc(cs, func(c quota.Claim) bool { return c.ID == id })
		if len(cs) == n {
			return nil, errNoChange
		}
		return cs, nil
	})
}
