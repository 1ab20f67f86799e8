// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/sdk"
)

// stateScript makes, in a sandbox of the busybox image, every kind of
// change a snapshot must keep: files with their modes and owners, a
// set-uid file, a symbolic and a hard link, a FIFO, a file of the image
// deleted (a whiteout) and a directory of the image replaced (opaque);
// and a link to a host secret, planted for the host that copies it.
const stateScript = `set -e
mkdir -p /data/dir
ln -s /etc/shadow /data/shadow
echo hello > /data/dir/file
chown 1234:5678 /data/dir/file
chmod 640 /data/dir/file
ln -s dir/file /data/link
ln /data/dir/file /data/hard
echo x > /data/suid && chmod 4755 /data/suid
mkfifo /data/fifo
rm /etc/group
rm -rf /app && mkdir /app && echo only > /app/only
if command -v python3 >/dev/null; then python3 -c 'import os; os.setxattr("/data/dir/file", "user.kept", b"yes")'; fi
`

// stateCheck prints what stateScript made, as seen in a restored sandbox.
const stateCheck = `cat /data/dir/file; stat -c '%a %u %g %h' /data/dir/file; readlink /data/link
stat -c '%i' /data/dir/file /data/hard | uniq | wc -l; stat -c '%a' /data/suid; test -p /data/fifo && echo fifo
test -e /etc/group || echo group-gone; ls /app
if command -v python3 >/dev/null; then python3 -c 'import os; print(os.getxattr("/data/dir/file", "user.kept").decode())'; else echo yes; fi
readlink /data/shadow
`

const stateWant = "hello\n640 1234 5678 2\ndir/file\n1\n4755\nfifo\ngroup-gone\nonly\nyes\n/etc/shadow\n"

// writerScript appends numbers to a log and renames a counter file as
// fast as it can: a snapshot taken meanwhile must be a point in time,
// the counter equal to the log's last number or one more.
const writerScript = `echo $$ > /tmp/writer.pid; i=0; while true; do i=$((i+1)); echo $i > /data/counter.tmp; mv /data/counter.tmp /data/counter; echo $i >> /data/log; done`

const writerCheck = `echo $(cat /data/counter) $(tail -n 1 /data/log)`

// snapshotScenario checks a runtime's snapshots through the server: what
// a restore keeps, a capture under heavy writes, a fork's forks each on
// its own, and that nothing outlives the deletes.
func snapshotScenario(t *testing.T, c *sdk.Client, req api.CreateSandboxRequest, keepsHoles bool) {
	t.Helper()
	// Whatever a failure leaves is deleted (a second delete is a 404).
	cleanup := func(id string) {
		t.Cleanup(func() { _ = c.DeleteSandbox(context.WithoutCancel(t.Context()), id) })
	}
	src, err := c.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	cleanup(src.ID)
	x := sandboxExecd(t, c, src.ID)
	if out, errOut, code := x.run(stateScript); code != 0 {
		t.Fatalf("state script: exit %d: %s %s", code, out, errOut)
	}
	// A terabyte of hole: copied as a hole where the runtime keeps them,
	// else refused before the engine writes it.
	if _, errOut, code := x.run("truncate -s 1099511627776 /data/sparse"); code != 0 {
		t.Fatalf("truncate: %s", errOut)
	}
	if !keepsHoles {
		sn, err := c.CreateSnapshot(ctx(t), src.ID, "sparse")
		if err != nil {
			t.Fatal(err)
		}
		testutilWaitSnapshot(t, c, sn.ID)
		got, _ := c.GetSnapshot(ctx(t), sn.ID)
		if got.Status.State != api.SnapshotFailed || !strings.Contains(got.Status.Message, "snapshot limit") {
			t.Errorf("snapshot of a terabyte of hole = %+v, want Failed naming the limit", got.Status)
		}
		_ = c.DeleteSnapshot(ctx(t), sn.ID)
		if _, errOut, code := x.run("rm /data/sparse"); code != 0 {
			t.Fatalf("rm: %s", errOut)
		}
	}
	if _, err := x.sdk.StartBackground(ctx(t), writerScript, sdk.CommandOptions{}); err != nil {
		t.Fatalf("writer: %v", err)
	}
	testutil.WaitFor(t, 10*time.Second, "the writer to write", func() bool {
		out, _, _ := x.run("test -s /data/log && echo ok")
		return out == "ok\n"
	})
	snap, err := c.CreateSnapshot(ctx(t), src.ID, "state")
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	testutilWaitSnapshot(t, c, snap.ID)
	if got, _ := c.GetSnapshot(ctx(t), snap.ID); got.Status.State != api.SnapshotReady {
		t.Fatalf("snapshot = %+v", got.Status)
	}
	if out, _, _ := x.run("echo after > /data/after"); out != "" {
		t.Fatalf("write after the snapshot: %q", out)
	}

	hour := int64(3600)
	restored, err := c.CreateSandbox(ctx(t), api.CreateSandboxRequest{SnapshotID: snap.ID, Timeout: &hour}, sdk.CreateOptions{})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	cleanup(restored.ID)
	rx := sandboxExecd(t, c, restored.ID)
	if out, errOut, _ := rx.run(stateCheck); out != stateWant {
		t.Errorf("the restored sandbox sees\n%s(stderr %q), want\n%s", out, errOut, stateWant)
	}
	if keepsHoles {
		if out, _, _ := rx.run("stat -c '%s %b' /data/sparse"); !strings.HasPrefix(out, "1099511627776 ") {
			t.Errorf("the restored sparse file: %q", out)
		}
	}
	if out, _, _ := rx.run("test -e /data/after && echo leaked || echo absent"); out != "absent\n" {
		t.Errorf("a write made after the snapshot is in the restore: %q", out)
	}
	out, _, _ := rx.run(writerCheck)
	if f := strings.Fields(out); len(f) != 2 || !(f[0] == f[1] || atoi(f[0]) == atoi(f[1])+1) || atoi(f[1]) == 0 {
		t.Errorf("captured during writes: counter and log's last = %q, want equal or one ahead", out)
	}
	if err := c.DeleteSnapshot(ctx(t), snap.ID); err != nil {
		t.Errorf("delete snapshot: %v", err)
	}
	// The restored sandbox outlives its snapshot's delete.
	if out, _, code := rx.run("cat /data/dir/file"); code != 0 || out != "hello\n" {
		t.Errorf("after the snapshot's delete, the restored sandbox reads %q (%d)", out, code)
	}
	if _, err := c.CreateSandbox(ctx(t), api.CreateSandboxRequest{SnapshotID: snap.ID, Timeout: &hour}, sdk.CreateOptions{}); err == nil {
		t.Errorf("a restore from a deleted snapshot succeeded")
	}

	// Fork: ten sandboxes from a 200 MiB working set, each on its own.
	if _, errOut, code := x.run("kill $(cat /tmp/writer.pid); dd if=/dev/urandom of=/data/big bs=1M count=200 2>/dev/null; md5sum /data/big"); code != 0 {
		t.Fatalf("working set: %s", errOut)
	}
	sum, _, _ := x.run("md5sum < /data/big")
	start := time.Now()
	forks, err := c.Fork(ctx(t), src.ID, api.ForkRequest{Count: 10, Metadata: map[string]string{"forked": "yes"}})
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	t.Logf("fork of 10 from a 200 MiB working set: %v", time.Since(start))
	for _, f := range forks.Sandboxes {
		cleanup(f.ID)
	}
	if len(forks.Sandboxes) != 10 {
		t.Fatalf("fork made %d sandboxes", len(forks.Sandboxes))
	}
	var wg sync.WaitGroup
	for i, f := range forks.Sandboxes {
		fx := sandboxExecd(t, c, f.ID)
		wg.Go(func() {
			if out, errOut, code := fx.run(fmt.Sprintf("echo %d > /data/mine; cat /data/dir/file", i)); code != 0 || out != "hello\n" {
				t.Errorf("fork %d: %q %q %d", i, out, errOut, code)
			}
		})
		if i == 0 {
			if got, _, _ := fx.run("md5sum < /data/big"); got != sum {
				t.Errorf("fork 0's working set: %q, want %q", got, sum)
			}
		}
	}
	wg.Wait()
	for i, f := range forks.Sandboxes {
		fx := sandboxExecd(t, c, f.ID)
		if out, _, _ := fx.run("cat /data/mine"); out != strconv.Itoa(i)+"\n" {
			t.Errorf("fork %d reads another's write: %q", i, out)
		}
		if f.Metadata["forked"] != "yes" {
			t.Errorf("fork %d metadata %v", i, f.Metadata)
		}
	}
	if out, _, _ := x.run("test -e /data/mine && echo leaked || echo absent"); out != "absent\n" {
		t.Errorf("a fork's write reached the source: %q", out)
	}
	for _, f := range forks.Sandboxes {
		if err := c.DeleteSandbox(ctx(t), f.ID); err != nil {
			t.Errorf("delete fork: %v", err)
		}
	}
	for _, id := range []string{src.ID, restored.ID} {
		if err := c.DeleteSandbox(ctx(t), id); err != nil {
			t.Errorf("delete: %v", err)
		}
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// TestOCISnapshotsAndFork: snapshots and forks on the native runtime, of
// an image's sandbox and of a "host" image sandbox (whose system
// directories are layers of their own); at the end no snapshot layer is
// left.
func TestOCISnapshotsAndFork(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	ref := busyboxInRegistry(t)
	dir := t.TempDir()
	s := startServer(t, dir, "--runtime", "oci")
	c := s.client(t)
	t.Run("image", func(t *testing.T) { snapshotScenario(t, c, ociCreate(ref), true) })
	t.Run("host", func(t *testing.T) {
		sb, err := c.CreateSandbox(ctx(t), ociCreate("host"), sdk.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		x := sandboxExecd(t, c, sb.ID)
		// A write to a system directory (its own overlay) and a deletion
		// of one of its files.
		if _, errOut, code := x.run("echo mine > /usr/local/mine && rm /usr/share/common-licenses/GPL-3 && echo root > /root/kept"); code != 0 {
			t.Fatalf("host writes: %s", errOut)
		}
		snap, err := c.CreateSnapshot(ctx(t), sb.ID, "host")
		if err != nil {
			t.Fatal(err)
		}
		testutilWaitSnapshot(t, c, snap.ID)
		hour := int64(3600)
		r, err := c.CreateSandbox(ctx(t), api.CreateSandboxRequest{SnapshotID: snap.ID, Timeout: &hour}, sdk.CreateOptions{})
		if err != nil {
			t.Fatalf("restore: %v", err)
		}
		out, _, _ := sandboxExecd(t, c, r.ID).run("cat /usr/local/mine /root/kept; test -e /usr/share/common-licenses/GPL-3 || echo gone; test -e /usr/share/common-licenses/GPL-2 && echo other-kept")
		if out != "mine\nroot\ngone\nother-kept\n" {
			t.Errorf("restored host sandbox sees %q", out)
		}
		for _, id := range []string{sb.ID, r.ID} {
			if err := c.DeleteSandbox(ctx(t), id); err != nil {
				t.Error(err)
			}
		}
		if err := c.DeleteSnapshot(ctx(t), snap.ID); err != nil {
			t.Error(err)
		}
	})
	s.stop(t)
	ociLeaks(dir)(t, nil)
}

// TestDockerSnapshotsAndFork: the same scenario on the docker runtime.
func TestDockerSnapshotsAndFork(t *testing.T) {
	cli := requireDocker(t)
	t.Parallel()
	ref := registryImage(t, cli)
	s := startServer(t, t.TempDir(), "--runtime", "docker")
	snapshotScenario(t, s.client(t), ociCreate(ref), false)
}
