package ociimage

import (
	"archive/tar"
	"io"
	"strings"
	"testing"
)

// TestLayer reads a layer back: entries sorted with their parents first,
// the base's modes and owners, no timestamps; the same files give the
// same digest, gzip or not.
func TestLayer(t *testing.T) {
	t.Parallel()
	files := append(BaseFiles(), File{Path: "/usr/local/bin/x", Data: []byte("x"), Mode: 0o755})
	type entry struct {
		mode     int64
		uid, gid int
		dir      bool
	}
	want := []struct {
		name string
		e    entry
	}{
		{"etc/", entry{0o755, 0, 0, true}},
		{"etc/group", entry{0o644, 0, 0, false}},
		{"etc/nsswitch.conf", entry{0o644, 0, 0, false}},
		{"etc/passwd", entry{0o644, 0, 0, false}},
		{"home/", entry{0o755, 0, 0, true}},
		{"home/nonroot/", entry{0o700, NonrootUID, NonrootUID, true}},
		{"root/", entry{0o700, 0, 0, true}},
		{"tmp/", entry{0o1777, 0, 0, true}},
		{"usr/", entry{0o755, 0, 0, true}},
		{"usr/local/", entry{0o755, 0, 0, true}},
		{"usr/local/bin/", entry{0o755, 0, 0, true}},
		{"usr/local/bin/x", entry{0o755, 0, 0, false}},
	}
	for _, c := range []Compression{Gzip, Uncompressed} {
		l, err := NewLayer(files, c)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		var i int
		for ; ; i++ {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got := entry{h.Mode, h.Uid, h.Gid, h.Typeflag == tar.TypeDir}
			if i >= len(want) || h.Name != want[i].name || got != want[i].e {
				t.Errorf("compression %d: entry %d = %s %+v", c, i, h.Name, got)
			} else if h.ModTime.Unix() != 0 {
				t.Errorf("%s: mtime %v, want the epoch", h.Name, h.ModTime)
			}
		}
		rc.Close()
		if i != len(want) {
			t.Errorf("compression %d: %d entries, want %d", c, i, len(want))
		}
		again, err := NewLayer(files, c)
		if err != nil {
			t.Fatal(err)
		}
		d1, err1 := l.Digest()
		d2, err2 := again.Digest()
		if err1 != nil || err2 != nil || d1 != d2 {
			t.Errorf("compression %d: digests %v (%v) and %v (%v), want equal", c, d1, err1, d2, err2)
		}
	}
}

func TestLayerBadFiles(t *testing.T) {
	t.Parallel()
	_, err := NewLayer([]File{{Path: "/a"}, {Path: "a"}, {Path: "/"}}, Gzip)
	for _, want := range []string{`file "a": given twice`, `file "/": not a path in the image`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewLayer: %v, want an error with %q", err, want)
		}
	}
}
