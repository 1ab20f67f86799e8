// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2b

import (
	"net/url"
	"reflect"
	"testing"
	"time"
)

func TestIDsMapBothWays(t *testing.T) {
	id := "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
	e, ok := FromCorralID(id)
	if !ok || e != "0f1e2d3c4b5a69788796a5b4c3d2e1f0" {
		t.Fatalf("FromCorralID = %q %v", e, ok)
	}
	if back, ok := ToCorralID(e); !ok || back != id {
		t.Fatalf("ToCorralID = %q %v", back, ok)
	}
	for _, bad := range []string{"", "sbx-1", "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1fz", "0f1e2d3c4b5a-6978-8796-a5b4c3d2e1f0-"} {
		if _, ok := FromCorralID(bad); ok {
			t.Errorf("FromCorralID(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"", "0F1E2D3C4B5A69788796A5B4C3D2E1F0", "0f1e2d3c4b5a69788796a5b4c3d2e1f", "../../etc/passwd0000000000000000", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"} {
		if _, ok := ToCorralID(bad); ok {
			t.Errorf("ToCorralID(%q) accepted", bad)
		}
	}
}

// TestMetadataFilter decodes what the SDK sends: for {"k y": "v&1"} the
// query carries metadata=k%252520y%3Dv%2525261.
func TestMetadataFilter(t *testing.T) {
	q, err := url.ParseQuery("metadata=k%252520y%3Dv%2525261")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseMetadataFilter(q.Get("metadata"))
	if err != nil || !reflect.DeepEqual(got, map[string]string{"k y": "v&1"}) {
		t.Fatalf("filter = %v %v", got, err)
	}
	two, err := ParseMetadataFilter(url.QueryEscape("a=1&b=x%3Dy"))
	if err != nil || !reflect.DeepEqual(two, map[string]string{"a": "1", "b": "x=y"}) {
		t.Fatalf("two pairs = %v %v", two, err)
	}
	for _, bad := range []string{"%ZZ", "novalue", "=v", url.QueryEscape("a=%ZZ")} {
		if _, err := ParseMetadataFilter(bad); err == nil {
			t.Errorf("ParseMetadataFilter(%q) accepted", bad)
		}
	}
}

func TestHosts(t *testing.T) {
	id := "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
	for host, want := range map[string]int{
		"49983-" + id + ".sbx.test":      49983,
		"3000-" + id + ".SBX.test:443":   3000,
		"8080-" + id + ".sbx.test.":      8080,
		"49983-" + id + ".other.test":    0,
		"49983-" + id + ".x.sbx.test":    0,
		"049983-" + id + ".sbx.test":     0,
		"70000-" + id + ".sbx.test":      0,
		"49983-" + id + "-x.sbx.test":    0,
		"api.sbx.test":                   0,
		"49983-.sbx.test":                0,
		"-" + id + ".sbx.test":           0,
		"49983-" + id + ".sbx.test.evil": 0,
	} {
		port, gotID, ok := ParseHost(host, "sbx.test")
		if want == 0 {
			if ok {
				t.Errorf("ParseHost(%q) = %d %s", host, port, gotID)
			}
			continue
		}
		if !ok || port != want || gotID != id {
			t.Errorf("ParseHost(%q) = %d %q %v", host, port, gotID, ok)
		}
	}
	if _, _, ok := ParseHost("49983-"+id+".sbx.test", ""); ok {
		t.Error("a host parsed without a domain")
	}
}

// TestFileSignatures: the values are SHA-256 computed apart (python's
// hashlib), as the SDK signs.
func TestFileSignatures(t *testing.T) {
	if got := FileSignature("/home/user/f.txt", "read", "", "tok123", 0); got != "v1_p8C1DyPq+MjMRWfatQ3XUOlEPfDCwZjBjH2zp8iYtP4" {
		t.Fatalf("read signature = %s", got)
	}
	if got := FileSignature("/home/user/f.txt", "write", "user", "tok123", 1767225600); got != "v1_hs90hFI60VyL5Yl1E4xGABYLpcE5sIvUZ9ZUniTQ7R4" {
		t.Fatalf("write signature = %s", got)
	}
	q := url.Values{"path": {"/home/user/f.txt"}, "signature": {FileSignature("/home/user/f.txt", "read", "", "tok123", 0)}}
	now := time.Unix(1767225000, 0)
	if err := CheckFileSignature("GET", q, "tok123", now); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		method string
		q      url.Values
		token  string
	}{
		"another token":     {"GET", q, "tok124"},
		"a write with read": {"POST", q, "tok123"},
		"another path":      {"GET", url.Values{"path": {"/etc/shadow"}, "signature": q["signature"]}, "tok123"},
		"expired": {"GET", url.Values{"path": {"/f"}, "signature_expiration": {"1767224000"},
			"signature": {FileSignature("/f", "read", "", "tok123", 1767224000)}}, "tok123"},
		"no signature":   {"GET", url.Values{"path": {"/f"}}, "tok123"},
		"bad expiry":     {"GET", url.Values{"path": {"/f"}, "signature": {"v1_x"}, "signature_expiration": {"soon"}}, "tok123"},
		"an empty token": {"GET", url.Values{"path": {"/f"}, "signature": {FileSignature("/f", "read", "", "", 0)}}, ""},
	} {
		if err := CheckFileSignature(c.method, c.q, c.token, now); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestTokensDifferPerSandboxAndPurpose(t *testing.T) {
	a, b := AccessToken("s1", "id1"), AccessToken("s1", "id2")
	if a == b || a == AccessToken("s2", "id1") || a == TrafficToken("s1", "id1") || a != AccessToken("s1", "id1") {
		t.Fatal("tokens do not separate sandboxes, secrets and purposes")
	}
	if Equal("", "") || Equal(a, "") || !Equal(a, a) {
		t.Fatal("Equal")
	}
}

func TestLocalCAIsKept(t *testing.T) {
	dir := t.TempDir()
	c1, ca1, err := LocalCA(dir, "sbx.test")
	if err != nil {
		t.Fatal(err)
	}
	_, ca2, err := LocalCA(dir, "sbx.test")
	if err != nil || string(ca1) != string(ca2) {
		t.Fatalf("the CA was not kept: %v", err)
	}
	if len(c1.Certificate) != 2 {
		t.Fatalf("the leaf comes without its CA: %d certificates", len(c1.Certificate))
	}
}

func FuzzParsers(f *testing.F) {
	f.Add("k%252520y%3Dv%2525261", "49983-0f1e2d3c4b5a69788796a5b4c3d2e1f0.sbx.test")
	f.Fuzz(func(t *testing.T, filter, host string) {
		_, _ = ParseMetadataFilter(filter)
		if port, id, ok := ParseHost(host, "sbx.test"); ok && (port < 1 || port > 65535 || id == "") {
			t.Fatalf("ParseHost(%q) = %d %q", host, port, id)
		}
		if id, ok := ToCorralID(filter); ok {
			if back, _ := FromCorralID(id); back != filter {
				t.Fatalf("%q → %q → %q", filter, id, back)
			}
		}
	})
}
