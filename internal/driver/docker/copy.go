// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package docker

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/moby/moby/client"

	"github.com/corral-dev/corral/internal/egress/launch"
	"github.com/corral-dev/corral/internal/insandbox"
)

// copyInRemote copies into a remote engine's container what a local one
// would mount: the corral binary and, for a policed sandbox, the
// credential proxy's CA.
func (d *Driver) copyInRemote(ctx context.Context, id, containerID string, policed bool) error {
	var files []inFile
	if ca := launch.CAFile(d.egressDir(id)); policed && ca != "" {
		b, err := os.ReadFile(ca)
		if err != nil {
			return err
		}
		files = append(files, inFile{Name: strings.TrimPrefix(insandbox.VaultCA, "/"), Mode: 0o644, Data: b})
	}
	return d.copyIn(ctx, containerID, true, files...)
}

// inFile is a file copied into a container before it starts.
type inFile struct {
	// Name is its path in the container, relative to the root.
	Name string
	Mode int64
	Data []byte
}

// copyIn copies the corral binary (to /.corral/corral, when binary) and
// files into a created container: a remote engine sees none of this
// machine's files. Each file's directory is created 0755.
func (d *Driver) copyIn(ctx context.Context, containerID string, binary bool, files ...inFile) error {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		var err error
		if binary {
			err = d.writeBinary(tw, ".corral/corral")
		}
		dirs := map[string]bool{}
		for _, in := range files {
			// Only the file's own directory: the engine makes missing
			// parents, and the image's own directories keep their modes.
			if dir := path.Dir(in.Name); err == nil && dir != "." && !dirs[dir] {
				dirs[dir] = true
				err = tw.WriteHeader(&tar.Header{Name: dir + "/", Typeflag: tar.TypeDir, Mode: 0o755})
			}
			if err == nil {
				err = tw.WriteHeader(&tar.Header{Name: in.Name, Typeflag: tar.TypeReg, Mode: in.Mode, Size: int64(len(in.Data))})
			}
			if err == nil {
				_, err = tw.Write(in.Data)
			}
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	cctx, cancel := context.WithTimeout(ctx, 2*d.cfg.CallTimeout)
	defer cancel()
	_, err := d.cli.CopyToContainer(cctx, containerID, client.CopyToContainerOptions{DestinationPath: "/", Content: pr})
	pr.Close()
	if err != nil {
		return d.engineErr("copy the corral binary", err)
	}
	return nil
}

// writeBinary writes the corral binary into tw as name, in its directory.
func (d *Driver) writeBinary(tw *tar.Writer, name string) error {
	f, err := os.Open(d.cfg.CorralBinary)
	if err != nil {
		return fmt.Errorf("corral binary: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if dir := path.Dir(name); dir != "." {
		if err := tw.WriteHeader(&tar.Header{Name: dir + "/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o555, Size: fi.Size()}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}
