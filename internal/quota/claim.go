// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package quota

import "time"

// Claim is room a server let a create or a resume in with, kept where
// every server sharing the records sees it until the record that holds
// the room has surely reached every server's view (ClaimTTL).
type Claim struct {
	// ID is the sandbox's.
	ID string `json:"id"`
	// Base is the record's revision the claim was made on (a resume); a
	// create's is empty.
	Base string    `json:"base,omitempty"`
	Need Usage     `json:"need"`
	At   time.Time `json:"at"`
}

// ClaimTTL is how long a claim is kept: beyond the time a record takes to
// reach every server's cache, and a minute (the creates-per-minute
// window).
const ClaimTTL = 70 * time.Second
