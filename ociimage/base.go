package ociimage

// NonrootUID is the user distroless's images name nonroot, kept for an
// image that drops root (prober's does not: Config.User).
const NonrootUID = 65532

// BaseFiles are what gcr.io/distroless/static adds to scratch and a Go
// binary can use: the users and groups (root, nobody, nonroot) that name
// a process's UID, the name service order Go's resolver reads (hosts
// before DNS), and the home and temporary directories. Not its CA bundle
// or time zones: see the package doc.
func BaseFiles() []File {
	return []File{
		{Path: "/etc/passwd", Data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{Path: "/etc/group", Data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{Path: "/etc/nsswitch.conf", Data: []byte("hosts: files dns\n")},
		{Path: "/tmp", Dir: true, Mode: 0o1777},
		{Path: "/root", Dir: true, Mode: 0o700},
		{Path: "/home/nonroot", Dir: true, Mode: 0o700, UID: NonrootUID, GID: NonrootUID},
	}
}
