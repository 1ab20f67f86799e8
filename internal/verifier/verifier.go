// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package verifier is how a sandbox checks a token it must not hold.
// Code in a sandbox can read whatever its daemons can (their environment,
// their files), so the runtime hands execd only a token's verifier,
// "sha256:" and the token's SHA-256 in hex: enough to check a presented
// token, useless for presenting one. A plain token is still accepted
// where one is configured by hand (execd run on its own, as OpenSandbox
// runs it). Runtimes make verifiers with Of; execd checks with Match.
package verifier

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"strings"
)

const prefix = "sha256:"

// Of returns the verifier of token.
func Of(token string) string {
	sum := sha256.Sum256([]byte(token))
	return prefix + hex.EncodeToString(sum[:])
}

// Match reports, in constant time for a given stored value, whether
// presented is the token that stored (a verifier, or a plain token)
// stands for. An empty stored value matches nothing.
func Match(stored, presented string) bool {
	if stored == "" || presented == "" {
		return false
	}
	if h, ok := strings.CutPrefix(stored, prefix); ok {
		want, err := hex.DecodeString(h)
		if err != nil || len(want) != sha256.Size {
			return false
		}
		got := sha256.Sum256([]byte(presented))
		return subtle.ConstantTimeCompare(got[:], want) == 1
	}
	return subtle.ConstantTimeCompare([]byte(presented), []byte(stored)) == 1
}
