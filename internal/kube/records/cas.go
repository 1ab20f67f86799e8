// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package records

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// casAttempts bounds the retries of a compare-and-swap that keeps losing
// to other writers.
const casAttempts = 40

// errNoChange is what a mutation returns to write nothing.
var errNoChange = errors.New("no change")

// errRemove is what a mutation returns to delete the Secret.
var errRemove = errors.New("remove")

// mutate changes the Secret name (of kind, this server's) by compare and
// swap: f gets its newest data from the API server (nil when there is
// none) and returns the next; the write is conditional on the revision
// read, and one that lost to another server's is computed again from a
// fresh read. f returning errNoChange writes nothing, errRemove deletes
// the Secret (if it is still the revision read); any other error is
// returned as it is. A Secret made carries extra among its labels.
func (s *secrets) mutate(ctx context.Context, name, kind string, extra labels.Set, f func(data map[string][]byte) (map[string][]byte, error)) error {
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			// Writers that collided do not collide again in lockstep.
			time.Sleep(time.Duration(rand.Int64N(int64(min(attempt, 10)) * int64(2*time.Millisecond))))
		}
		if attempt == casAttempts {
			return fmt.Errorf("records: Secret %s: %d writes in a row lost to other servers' writes", name, casAttempts)
		}
		var cur corev1.Secret
		err := s.getOurs(ctx, name, &cur)
		exists := err == nil
		if err != nil && !apierrors.IsNotFound(err) {
			return apiErr("read Secret "+name, err)
		}
		var data map[string][]byte
		if exists {
			data = cur.Data
		}
		next, err := f(data)
		switch {
		case errors.Is(err, errNoChange):
			return nil
		case errors.Is(err, errRemove):
			if !exists {
				return nil
			}
			pre := client.Preconditions{UID: &cur.UID, ResourceVersion: &cur.ResourceVersion}
			err = s.c.Delete(ctx, &cur, pre)
			if apierrors.IsConflict(err) {
				continue
			}
			if err != nil && !apierrors.IsNotFound(err) {
				return apiErr("delete Secret "+name, err)
			}
			return nil
		case err != nil:
			return err
		}
		if !exists {
			sec := &corev1.Secret{ObjectMeta: s.meta(name, kind), Type: corev1.SecretTypeOpaque, Data: next}
			sec.Labels = labels.Merge(sec.Labels, extra)
			err = s.c.Create(ctx, sec)
			if apierrors.IsAlreadyExists(err) {
				continue
			}
		} else {
			up := cur.DeepCopy()
			up.Data = next
			err = s.c.Update(ctx, up)
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				continue
			}
		}
		if err != nil {
			return apiErr("write Secret "+name, err)
		}
		return nil
	}
}

// getOurs reads one of this server's Secrets from the API server; another
// server's is not found.
func (s *secrets) getOurs(ctx context.Context, name string, sec *corev1.Secret) error {
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.cfg.Namespace, Name: name}, sec); err != nil {
		return err
	}
	if !labels.SelectorFromSet(s.ours).Matches(labels.Set(sec.Labels)) {
		return apierrors.NewNotFound(corev1.Resource("secrets"), name)
	}
	return nil
}

// list returns this kind's Secrets from the cache.
func (s *secrets) list(ctx context.Context) ([]corev1.Secret, error) {
	var l corev1.SecretList
	if err := s.cache.List(ctx, &l, client.InNamespace(s.cfg.Namespace)); err != nil {
		return nil, apiErr("list Secrets", err)
	}
	return l.Items, nil
}
