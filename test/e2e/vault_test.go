// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/testutil/netlab"
	"github.com/corral-dev/corral/sdk"
)

// secret is the credential value no part of the sandbox may show. The
// probes inside the sandbox search for it by its two halves, so that the
// search's own command line does not contain it.
const (
	secretA = "corral-vault-"
	secretB = "s3cr3t-7d1e9a"
	secret  = secretA + secretB
)

// vaultWorld extends the egress world with servers that report the
// credentials they receive: secure.test over HTTPS (a certificate from a
// CA the server is told to trust), plain.test over HTTP, nobind.test
// bound by nothing, and imposter.test over HTTPS with a certificate
// nobody trusts.
type vaultWorld struct {
	netlab.World
	upstreamCA string
	mu         sync.Mutex
	seen       map[string][]string // host → Authorization and X-Api-Key values received
}

func newVaultWorld(t *testing.T) *vaultWorld {
	t.Helper()
	vw := &vaultWorld{World: egressWorld(t), seen: map[string][]string{}}
	trusted := netlab.NewCA(t, "world CA")
	untrusted := netlab.NewCA(t, "nobody's CA")
	vw.upstreamCA = filepath.Join(t.TempDir(), "world-ca.pem")
	if err := os.WriteFile(vw.upstreamCA, trusted.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	report := func(host string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			vw.mu.Lock()
			vw.seen[host] = append(vw.seen[host], r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
			vw.mu.Unlock()
			// Only fingerprints go back: the sandbox must never see the value.
			fmt.Fprintf(w, "%s auth=%s key=%s\n", host, fingerprint(r.Header.Get("Authorization")), fingerprint(r.Header.Get("X-Api-Key")))
		})
	}
	netlab.ServeHTTPIn(t, vw.World.World, netlab.WorldWeb+":443", report("secure.test"), trusted.Issue(t, "secure.test"))
	netlab.ServeHTTPIn(t, vw.World.World, worldLater+":443", report("imposter.test"), untrusted.Issue(t, "imposter.test"))
	netlab.ServeHTTPIn(t, vw.World.World, worldWild+":8080", report("plain.test"))
	netlab.ServeHTTPIn(t, vw.World.World, netlab.WorldOther+":8080", report("nobind.test"))
	if out, err := exec.Command("ip", "-n", vw.World.World, "addr", "add", "203.0.113.54/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	netlab.ServeDNS(t, vw.World.World, "203.0.113.54:53", map[string]string{
		"secure.test.":   netlab.WorldWeb,
		"imposter.test.": worldLater,
		"plain.test.":    worldWild,
		"nobind.test.":   netlab.WorldOther,
	})
	return vw
}

// fingerprint names a header value without showing it ("-" when empty).
func fingerprint(v string) string {
	if v == "" {
		return "-"
	}
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:6])
}

func (vw *vaultWorld) received(host string) string {
	vw.mu.Lock()
	defer vw.mu.Unlock()
	return strings.Join(vw.seen[host], " ")
}

// egressCall sends one request to a sandbox's egress API.
func egressCall(t *testing.T, c *sdk.Client, id, method, path, body string) (int, string) {
	t.Helper()
	ep, err := c.GetEndpoint(ctx(t), id, api.EgressPort, false)
	if err != nil {
		t.Fatal(err)
	}
	return httpCall(t, method, "http://"+ep.Endpoint+path, ep.Headers, body)
}

// TestOCICredentialVault: a sandbox uses an API key it can never read.
// The credential proxy injects it into HTTPS requests (which the
// sandbox's curl verifies against the installed per-sandbox CA) and
// plain HTTP ones to bound hosts only, verifies the real servers, and the
// value shows up nowhere in the sandbox or in the API's answers.
func TestOCICredentialVault(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		t.Skip("curl is not installed on this machine (the host image runs it)")
	}
	vw := newVaultWorld(t)
	dir := t.TempDir()
	s := startServer(t, dir, "--runtime", "oci", "--egress-uplink-netns", netlab.NetnsPath(vw.Uplink),
		"--egress-subnet", "10.215.0.0/24", "--egress-upstream", "203.0.113.54:53", "--egress-upstream-ca", vw.upstreamCA)
	c := s.client(t)
	req := ociCreate("host")
	req.NetworkPolicy = &api.NetworkPolicy{DefaultAction: "deny", Egress: []api.NetworkRule{
		{Action: "allow", Target: "secure.test"}, {Action: "allow", Target: "plain.test"},
		{Action: "allow", Target: "nobind.test"}, {Action: "allow", Target: "imposter.test"},
	}}
	req.CredentialProxy = &api.CredentialProxyConfig{Enabled: true}
	sb, err := c.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	x := sandboxExecd(t, c, sb.ID)

	// The vault, with the contract's answers for bad and conflicting input.
	if code, body := egressCall(t, c, sb.ID, "GET", "/credential-vault", ""); code != 404 {
		t.Errorf("GET before create = %d %s", code, body)
	}
	vaultBody := `{"credentials":[{"name":"api","source":{"type":"inline","value":"` + secret + `"}}],"bindings":[
		{"name":"secure","match":{"hosts":["secure.test"]},"auth":{"type":"bearer","credential":"api"}},
		{"name":"imposter","match":{"hosts":["imposter.test"]},"auth":{"type":"bearer","credential":"api"}},
		{"name":"plain","match":{"hosts":["plain.test"],"schemes":["http"],"ports":[8080]},"auth":{"type":"apiKey","name":"X-Api-Key","credential":"api"}}]}`
	for _, bad := range []string{
		strings.Replace(vaultBody, `"plain.test"`, `"unlisted.test"`, 1), // not allowed by the policy
		strings.Replace(vaultBody, `"credential":"api"}}]}`, `"credential":"nope"}}]}`, 1),
		`{"credentials":[]}`, `not json`,
	} {
		if code, body := egressCall(t, c, sb.ID, "POST", "/credential-vault", bad); code != 400 {
			t.Errorf("POST %.60s… = %d %s, want 400", bad, code, body)
		}
	}
	code, body := egressCall(t, c, sb.ID, "POST", "/credential-vault", vaultBody)
	if code != 201 || strings.Contains(body, secret) || !strings.Contains(body, `"revision":1`) {
		t.Fatalf("POST /credential-vault = %d %s", code, body)
	}
	if code, _ := egressCall(t, c, sb.ID, "POST", "/credential-vault", vaultBody); code != 409 {
		t.Errorf("second POST = %d, want 409", code)
	}
	if code, _ := egressCall(t, c, sb.ID, "PATCH", "/credential-vault", `{"expectedRevision":7,"credentials":{"delete":["api"]}}`); code != 409 {
		t.Errorf("PATCH at a stale revision = %d, want 409", code)
	}
	for _, bad := range []struct {
		method, path, body string
		want               int
	}{
		{"GET", "/credential-vault/credentials/nope", "", 404},
		{"GET", "/credential-vault/bindings/nope", "", 404},
		{"GET", "/credential-vault/other", "", 404},
		{"PUT", "/credential-vault/credentials/api", "{}", 405},
		{"PUT", "/credential-vault", "{}", 405},
		{"PATCH", "/credential-vault", `{}`, 400},
		{"PATCH", "/credential-vault", `{"credentials":{"delete":["nope"]}}`, 404},
		{"PATCH", "/credential-vault", `{"credentials":{"add":[{"name":"api","source":{"type":"inline","value":"x"}}]}}`, 409},
		{"PATCH", "/credential-vault", `{"bogus":1}`, 400},
		{"PATCH", "/credential-vault", `{"credentials":{"add":[{"name":"big","source":{"type":"inline","value":"` + strings.Repeat("x", 2<<20) + `"}}]}}`, 413},
	} {
		if code, body := egressCall(t, c, sb.ID, bad.method, bad.path, bad.body); code != bad.want || strings.Contains(body, secret) {
			t.Errorf("%s %s = %d %.80s, want %d", bad.method, bad.path, code, body, bad.want)
		}
	}
	ep, err := c.GetEndpoint(ctx(t), sb.ID, api.EgressPort, false)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := httpCall(t, "GET", "http://"+ep.Endpoint+"/credential-vault", nil, ""); code != 401 {
		t.Errorf("GET /credential-vault without the token = %d", code)
	}

	curl := func(url string) string {
		out, errOut, _ := x.run("curl -sS --max-time 5 " + url)
		return out + errOut
	}
	t.Run("HTTPSInjectedAndVerified", func(t *testing.T) {
		out := curl("https://secure.test/")
		if !strings.Contains(out, "auth="+fingerprint("Bearer "+secret)) {
			t.Errorf("https://secure.test/ = %q", out)
		}
	})
	t.Run("HTTPInjectedForABoundHost", func(t *testing.T) {
		if out := curl("http://plain.test:8080/"); !strings.Contains(out, "key="+fingerprint(secret)) {
			t.Errorf("http://plain.test:8080/ = %q", out)
		}
	})
	t.Run("UnboundHostGetsNothing", func(t *testing.T) {
		if out := curl("http://nobind.test:8080/"); !strings.Contains(out, "auth=- key=-") {
			t.Errorf("http://nobind.test:8080/ = %q", out)
		}
		if got := vw.received("nobind.test"); strings.Contains(got, secret) {
			t.Errorf("nobind.test received the credential: %q", got)
		}
	})
	t.Run("UntrustedServerGetsNothing", func(t *testing.T) {
		out := curl("https://imposter.test/")
		if !strings.Contains(out, "502") && !strings.Contains(out, "not trusted") {
			t.Errorf("https://imposter.test/ = %q, want the proxy's refusal", out)
		}
		if got := vw.received("imposter.test"); got != "" {
			t.Errorf("the untrusted server got requests: %q", got)
		}
	})
	t.Run("SecretAppearsNowhere", func(t *testing.T) {
		probe := `env; cat /proc/*/environ /proc/*/cmdline 2>/dev/null | tr '\0' '\n'; ps -ef; dmesg 2>/dev/null | tail -5; ` +
			`A='` + secretA + `'; B='` + secretB + `'; grep -rsl -F -f <(printf '%s%s\n' "$A" "$B") /etc /tmp /root /var /run /home /opt /srv /.corral && echo "FOUND""-IN-FILES"`
		out, errOut, _ := x.run(probe, map[string]any{"timeout": 60000})
		for _, line := range strings.Split(out+errOut, "\n") {
			if strings.Contains(line, secret) || strings.Contains(line, "FOUND-IN-FILES") {
				t.Errorf("the sandbox can read the secret: %q", line)
			}
		}
		// The probe does find the value where it is.
		x.run(`A='` + secretA + `'; B='` + secretB + `'; printf '%s%s\n' "$A" "$B" > /tmp/control`)
		if out, _, _ := x.run(probe, map[string]any{"timeout": 60000}); !strings.Contains(out, "/tmp/control\nFOUND-IN-FILES") {
			t.Errorf("the probe missed a planted copy: %q", out)
		}
		x.run("rm /tmp/control")
		for _, path := range []string{"/credential-vault", "/credential-vault/credentials", "/credential-vault/credentials/api",
			"/credential-vault/bindings", "/credential-vault/bindings/plain", "/policy", "/events"} {
			if code, body := egressCall(t, c, sb.ID, "GET", path, ""); code != 200 || strings.Contains(body, secret) {
				t.Errorf("GET %s = %d, shows the secret: %v", path, code, strings.Contains(body, secret))
			}
		}
		page, err := c.SandboxEvents(ctx(t), sb.ID, sdk.SandboxEventOptions{Type: "egress", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(page)
		if strings.Contains(string(b), secret) {
			t.Error("the server's event log shows the secret")
		}
	})
	t.Run("InjectionsAreAudited", func(t *testing.T) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			page, err := c.SandboxEvents(ctx(t), sb.ID, sdk.SandboxEventOptions{Type: "egress.credential", Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			var seen []string
			for _, ev := range page.Items {
				seen = append(seen, ev.Reason+" "+ev.Message)
			}
			all := strings.Join(seen, "\n")
			if strings.Contains(all, "inject secure.test:443: binding secure") && strings.Contains(all, "inject plain.test:8080: binding plain") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("credential events:\n%s", all)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	t.Run("DeleteStopsInjection", func(t *testing.T) {
		if code, body := egressCall(t, c, sb.ID, "DELETE", "/credential-vault", ""); code != 204 {
			t.Fatalf("DELETE = %d %s", code, body)
		}
		if out := curl("http://plain.test:8080/"); !strings.Contains(out, "key=-") {
			t.Errorf("after DELETE: %q", out)
		}
	})
}

// TestDockerCredentialVault: the same injection from a Docker container.
func TestDockerCredentialVault(t *testing.T) {
	cli := requireDocker(t)
	t.Parallel()
	vw := newVaultWorld(t)
	runDockerVault(t, vw, registryImage(t, cli), "--egress-uplink-netns", netlab.NetnsPath(vw.Uplink), "--egress-subnet", "10.216.0.0/24")
}

// TestDockerRemoteCredentialVault: the same on a remote engine, where the
// credential proxy runs in the sandbox's sidecar, its connections to the
// real hosts leave the namespace it polices by their mark, and it
// verifies the real servers with the roots the server handed it.
func TestDockerRemoteCredentialVault(t *testing.T) {
	requireDocker(t)
	t.Parallel()
	vw := newVaultWorld(t)
	_, args, image := remoteEngine(t, vw.World)
	runDockerVault(t, vw, image, args...)
}

func runDockerVault(t *testing.T, vw *vaultWorld, image string, args ...string) {
	dir := t.TempDir()
	s := startServer(t, dir, append([]string{"--runtime", "docker", "--egress-upstream", "203.0.113.54:53", "--egress-upstream-ca", vw.upstreamCA}, args...)...)
	c := s.client(t)
	req := ociCreate(image)
	req.NetworkPolicy = &api.NetworkPolicy{DefaultAction: "deny", Egress: []api.NetworkRule{
		{Action: "allow", Target: "plain.test"}, {Action: "allow", Target: "nobind.test"}}}
	req.CredentialProxy = &api.CredentialProxyConfig{Enabled: true}
	sb, err := c.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	x := sandboxExecd(t, c, sb.ID)
	// Through the SDK this time.
	eg, err := c.Egress(ctx(t), sb.ID, sdk.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := eg.CreateVault(ctx(t), api.CredentialVaultCreateRequest{
		Credentials: []api.Credential{{Name: "api", Source: api.CredentialSource{Type: "inline", Value: secret}}},
		Bindings: []api.CredentialBinding{{Name: "plain", Match: api.CredentialMatch{Hosts: []string{"plain.test"}, Schemes: []string{"http"}, Ports: []int{8080}},
			Auth: api.CredentialAuth{Type: "apiKey", Name: "X-Api-Key", Credential: "api"}}},
	})
	if err != nil || st.Revision != 1 || len(st.Bindings) != 1 {
		t.Fatalf("CreateVault = %+v %v", st, err)
	}
	stale := int64(5)
	var ae *sdk.APIError
	if _, err := eg.UpdateVault(ctx(t), api.CredentialVaultMutationRequest{ExpectedRevision: &stale,
		Credentials: &api.CredentialMutations{Delete: []string{"api"}}}); !errors.As(err, &ae) || ae.Status != 409 {
		t.Errorf("UpdateVault at a stale revision = %v, want 409", err)
	}
	if out, ok := get(x, "http://plain.test:8080/"); !ok || !strings.Contains(out, "key="+fingerprint(secret)) {
		t.Errorf("http://plain.test:8080/ = %q", out)
	}
	if out, ok := get(x, "http://nobind.test:8080/"); !ok || !strings.Contains(out, "key=-") {
		t.Errorf("http://nobind.test:8080/ = %q", out)
	}
	if out, _, _ := x.run("env; cat /proc/*/environ 2>/dev/null; cat " + "/etc/corral/vault-ca.pem"); strings.Contains(out, secret) {
		t.Error("the container can read the secret")
	}
	if out, _, _ := x.run("cat /etc/ssl/certs/ca-certificates.crt"); !strings.Contains(out, "BEGIN CERTIFICATE") {
		t.Errorf("the sandbox CA was not installed: %q", out)
	}
	if err := eg.DeleteVault(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := eg.Vault(ctx(t)); !errors.Is(err, sdk.ErrNotFound) {
		t.Errorf("Vault after DeleteVault = %v, want not found", err)
	}
}
