// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package launch

import (
	"net/netip"
	"strings"
)

// JoinPrefixes is prefixes as `corral egress` takes them in a flag.
func JoinPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}
