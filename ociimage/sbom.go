package ociimage

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"runtime/debug"
	"slices"
	"sort"
	"strings"

	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx/v2/common"
	spdx "github.com/spdx/tools-golang/spdx/v2/v2_3"
)

// SBOM says what NewSBOM describes.
type SBOM struct {
	// Name names the document, such as the image's reference.
	Name string
	// Namespace is the document's unique URI; a digest of what it
	// describes (the image index's) makes it unique and reproducible.
	Namespace string
	// Version is the main module's version: a build with -buildvcs=false
	// or from a work tree records "(devel)" in the binary.
	Version string
	// Binaries are the build information of the image's binaries
	// (debug/buildinfo.ReadFile), one per platform; their modules are
	// merged.
	Binaries []*debug.BuildInfo
	// Tool names the creator, such as "prober-image".
	Tool string
}

// NewSBOM returns an SPDX 2.3 document of the Go modules built into the
// binaries: the main module (the document describes it), each module it
// depends on (replacements as built), and the Go toolchain's standard
// library (as "stdlib", as syft names it), each with its version and a
// package URL (pkg:golang/...). Licenses are NOASSERTION: a binary does
// not record them. No clock: created is Epoch.
func NewSBOM(s SBOM) (*spdx.Document, error) {
	if len(s.Binaries) == 0 {
		return nil, errors.New("sbom: no binaries")
	}
	main := s.Binaries[0].Main.Path
	if main == "" {
		return nil, errors.New("sbom: build info names no main module")
	}
	version := s.Version
	if version == "" {
		version = s.Binaries[0].Main.Version
	}
	type module struct{ path, version string }
	deps := map[module]bool{}
	var goVersions []string
	for _, bi := range s.Binaries {
		if bi.Main.Path != main {
			return nil, fmt.Errorf("sbom: binaries of modules %s and %s", main, bi.Main.Path)
		}
		if !slices.Contains(goVersions, bi.GoVersion) {
			goVersions = append(goVersions, bi.GoVersion)
		}
		for _, d := range bi.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			deps[module{d.Path, d.Version}] = true
		}
	}
	mods := make([]module, 0, len(deps))
	for m := range deps {
		mods = append(mods, m)
	}
	sort.Slice(mods, func(i, j int) bool {
		if mods[i].path != mods[j].path {
			return mods[i].path < mods[j].path
		}
		return mods[i].version < mods[j].version
	})
	sort.Strings(goVersions)

	ids := map[common.ElementID]bool{}
	id := func(name string) common.ElementID {
		base := "Package-go-" + strings.Trim(nonID.ReplaceAllString(name, "-"), "-")
		e := common.ElementID(base)
		for n := 2; ids[e]; n++ {
			e = common.ElementID(fmt.Sprintf("%s-%d", base, n))
		}
		ids[e] = true
		return e
	}
	pkg := func(name, version, purl string) *spdx.Package {
		return &spdx.Package{
			PackageName: name, PackageSPDXIdentifier: id(name), PackageVersion: version,
			PackageDownloadLocation: "NOASSERTION",
			PackageLicenseConcluded: "NOASSERTION", PackageLicenseDeclared: "NOASSERTION",
			PackageCopyrightText: "NOASSERTION",
			PackageExternalReferences: []*spdx.PackageExternalReference{{
				Category: common.CategoryPackageManager, RefType: "purl", Locator: purl,
			}},
		}
	}
	root := pkg(main, version, goPURL(main, version))
	root.PrimaryPackagePurpose = "APPLICATION"
	doc := &spdx.Document{
		SPDXVersion: spdx.Version, DataLicense: spdx.DataLicense,
		SPDXIdentifier: "DOCUMENT", DocumentName: s.Name, DocumentNamespace: s.Namespace,
		CreationInfo: &spdx.CreationInfo{
			Creators: []common.Creator{{CreatorType: "Tool", Creator: s.Tool}},
			Created:  Epoch.Format("2006-01-02T15:04:05Z"),
		},
		Packages: []*spdx.Package{root},
		Relationships: []*spdx.Relationship{{
			RefA: common.MakeDocElementID("", "DOCUMENT"), RefB: common.MakeDocElementID("", string(root.PackageSPDXIdentifier)),
			Relationship: common.TypeRelationshipDescribe,
		}},
	}
	dependsOn := func(p *spdx.Package) {
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, &spdx.Relationship{
			RefA: common.MakeDocElementID("", string(root.PackageSPDXIdentifier)), RefB: common.MakeDocElementID("", string(p.PackageSPDXIdentifier)),
			Relationship: common.TypeRelationshipDependsOn,
		})
	}
	for _, v := range goVersions {
		// pkg:golang/stdlib@1.26.8, as syft names the toolchain.
		dependsOn(pkg("stdlib", v, goPURL("stdlib", strings.TrimPrefix(v, "go"))))
	}
	for _, m := range mods {
		dependsOn(pkg(m.path, m.version, goPURL(m.path, m.version)))
	}
	return doc, nil
}

// WriteSBOM writes doc as SPDX JSON.
func WriteSBOM(w io.Writer, doc *spdx.Document) error {
	return spdxjson.Write(doc, w, spdxjson.Indent("  "))
}

// nonID is what an SPDX element ID may not hold (SPDX 2.3 §3.2).
var nonID = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// goPURL is a Go module's package URL: its path's segments escaped one by
// one (the purl spec's golang type keeps the path's case), "@", the
// escaped version (a "+incompatible" is "%2Bincompatible").
func goPURL(path, version string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	p := "pkg:golang/" + strings.Join(segs, "/")
	if version != "" && version != "(devel)" {
		p += "@" + strings.ReplaceAll(url.PathEscape(version), "+", "%2B")
	}
	return p
}
