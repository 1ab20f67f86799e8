// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

// Labels stamped on every backend object a driver creates (and on the
// records shared through a cluster), under the reserved corral.dev/.
const (
	LabelSandboxID = "corral.dev/sandbox-id"
	LabelManaged   = "corral.dev/managed"
	LabelTenant    = "corral.dev/tenant"
	// LabelServer names the server that owns a backend object, when
	// several servers share a backend (one Docker engine).
	LabelServer = "corral.dev/server"
)

// ReservedPrefixes are label prefixes users may not set.
func ReservedPrefixes() []string { return []string{"opensandbox.io/", "corral.dev/"} }

// ValidateMetadata checks keys and values against the Kubernetes label
// rules the contract names, and rejects reserved prefixes.
func ValidateMetadata(md map[string]string) error {
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := ValidateMetadataKey(k); err != nil {
			return err
		}
		if err := validateLabelValue(md[k]); err != nil {
			return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidMetadataLabel, "metadata value for %q: %v", k, err)
		}
	}
	return nil
}

// ValidateMetadataKey checks one key.
func ValidateMetadataKey(k string) error {
	for _, p := range ReservedPrefixes() {
		if strings.HasPrefix(k, p) {
			return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidMetadataLabel, "metadata key %q: the prefix %q is reserved", k, p)
		}
	}
	name := k
	if prefix, rest, ok := strings.Cut(k, "/"); ok {
		if err := validateDNSSubdomain(prefix); err != nil {
			return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidMetadataLabel, "metadata key %q: prefix: %v", k, err)
		}
		name = rest
	}
	if name == "" {
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidMetadataLabel, "metadata key %q: the name part is empty", k)
	}
	if err := validateLabelValue(name); err != nil {
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidMetadataLabel, "metadata key %q: %v", k, err)
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// validateLabelValue: empty, or ≤63 of [A-Za-z0-9._-] starting and ending
// with an alphanumeric.
func validateLabelValue(v string) error {
	if v == "" {
		return nil
	}
	if len(v) > 63 {
		return fmt.Errorf("longer than 63 characters")
	}
	if !isAlnum(v[0]) || !isAlnum(v[len(v)-1]) {
		return fmt.Errorf("must start and end with a letter or digit")
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return fmt.Errorf("character %q is not allowed (letters, digits, '-', '_' and '.' are)", c)
		}
	}
	return nil
}

func validateDNSSubdomain(s string) error {
	if s == "" || len(s) > 253 {
		return fmt.Errorf("must be 1 to 253 characters")
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("each dot-separated part must be 1 to 63 characters")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("must be lower-case letters, digits, '-' and '.'")
			}
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("parts must not start or end with '-'")
		}
	}
	return nil
}

// MergePatch applies an RFC 7396 merge patch to md: a value adds or
// replaces, nil deletes. It returns a new map and never modifies md.
func MergePatch(md map[string]string, patch map[string]*string) (map[string]string, error) {
	out := make(map[string]string, len(md)+len(patch))
	for k, v := range md {
		out[k] = v
	}
	keys := make([]string, 0, len(patch))
	for k := range patch {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := ValidateMetadataKey(k); err != nil {
			return nil, err
		}
		v := patch[k]
		if v == nil {
			delete(out, k)
			continue
		}
		if err := validateLabelValue(*v); err != nil {
			return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidMetadataLabel, "metadata value for %q: %v", k, err)
		}
		out[k] = *v
	}
	return out, nil
}

// ParseMetadataQuery parses the list filter's metadata parameter: a
// URL-encoded query string "k1=v1&k2=v2" whose pairs are ANDed. Every pair
// must have a key and an '='; a key may appear once.
func ParseMetadataQuery(q string) (map[string]string, error) {
	out := map[string]string{}
	if q == "" {
		return out, nil
	}
	for _, pair := range strings.Split(q, "&") {
		rawK, rawV, ok := strings.Cut(pair, "=")
		if !ok || rawK == "" {
			return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidMetadataFormat,
				"metadata filter %q: each pair must look like key=value", pair)
		}
		k, err1 := url.QueryUnescape(rawK)
		v, err2 := url.QueryUnescape(rawV)
		if err1 != nil || err2 != nil {
			return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidMetadataFormat,
				"metadata filter %q: bad percent-encoding", pair)
		}
		if _, dup := out[k]; dup {
			return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidMetadataFormat,
				"metadata filter: key %q appears twice", k)
		}
		out[k] = v
	}
	return out, nil
}

// MatchesMetadata reports whether md has every pair of filter.
func MatchesMetadata(md, filter map[string]string) bool {
	for k, v := range filter {
		got, ok := md[k]
		if !ok || got != v {
			return false
		}
	}
	return true
}
