package ociimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one entry of a layer: a directory (Dir), a file with the bytes
// Data, or a file copied from the host file From.
type File struct {
	// Path is where the entry is in the image, such as "/prober".
	Path string
	// Mode is the tar mode: permission bits, and 0o1000 for the sticky
	// bit (/tmp's 0o1777). Zero means 0o755 for a directory, else 0o644.
	Mode     int64
	UID, GID int
	Dir      bool
	Data     []byte
	From     string
}

// Compression says how a layer's blob is stored.
type Compression int

const (
	// Gzip is the layer media type every registry and runtime takes;
	// `make image` uses it.
	Gzip Compression = iota
	// Uncompressed skips the compression a local import never needs
	// (testbed's images of tens of megabytes, imported on every node).
	Uncompressed
)

// NewLayer returns a layer holding files, sorted by path, with every
// missing parent directory added (0755, root), and no timestamps, so the
// same files give the same digest.
func NewLayer(files []File, c Compression) (v1.Layer, error) {
	b, err := layerTar(files)
	if err != nil {
		return nil, err
	}
	switch c {
	case Uncompressed:
		// An uncompressed layer's digest is its diff ID.
		return static.NewLayer(b, types.OCIUncompressedLayer), nil
	case Gzip:
		open := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
		return tarball.LayerFromOpener(open, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	}
	return nil, fmt.Errorf("layer: unknown compression %d", c)
}

func layerTar(files []File) ([]byte, error) {
	entries := map[string]File{}
	var errs []error
	for _, f := range files {
		p := strings.TrimPrefix(path.Clean("/"+f.Path), "/")
		if p == "" || p == "." {
			errs = append(errs, fmt.Errorf("file %q: not a path in the image", f.Path))
			continue
		}
		if _, dup := entries[p]; dup {
			errs = append(errs, fmt.Errorf("file %q: given twice", f.Path))
			continue
		}
		entries[p] = f
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for p := range entries {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, ok := entries[d]; !ok {
				entries[d] = File{Dir: true}
			}
		}
	}
	names := make([]string, 0, len(entries))
	for p := range entries {
		names = append(names, p)
	}
	// A parent sorts before its children: it is their prefix.
	sort.Strings(names)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range names {
		f := entries[p]
		h := &tar.Header{Name: p, Mode: f.Mode, Uid: f.UID, Gid: f.GID, ModTime: Epoch}
		if f.Dir {
			h.Typeflag, h.Name = tar.TypeDir, p+"/"
			if h.Mode == 0 {
				h.Mode = 0o755
			}
			if err := tw.WriteHeader(h); err != nil {
				return nil, err
			}
			continue
		}
		h.Typeflag = tar.TypeReg
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		data := f.Data
		if f.From != "" {
			b, err := readRegular(f.From)
			if err != nil {
				return nil, err
			}
			data = b
		}
		h.Size = int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func readRegular(name string) ([]byte, error) {
	st, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	return os.ReadFile(name)
}
