package packaging

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.yaml.in/yaml/v3"

	"github.com/sluicelab/sluice/internal/testenv"
)

// release is what one run of scripts/release produced for one
// architecture.
type release struct {
	dir                  string // the output directory
	binary, archive, deb string // file names in dir
	progress             string // its stderr
}

// runRelease runs scripts/release for the host's architecture only, into
// a temporary directory, and returns what it wrote.
func runRelease(t *testing.T) release {
	t.Helper()
	bash := testenv.Program(t, "bash")
	for _, p := range []string{"go", "git", "tar", "gzip", "sha256sum"} {
		testenv.Program(t, p)
	}
	dist := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, "../scripts/release")
	cmd.Env = append(os.Environ(), "SLUICE_RELEASE_ARCHES="+runtime.GOARCH, "SLUICE_DIST="+dist)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/release: %v\n%s", err, stderr.String())
	}
	r := release{dir: dist, progress: stderr.String()}
	for _, l := range strings.Fields(string(out)) {
		name := filepath.Base(l)
		if filepath.Dir(l) != dist {
			t.Fatalf("scripts/release wrote %s outside %s", l, dist)
		}
		switch {
		case strings.HasSuffix(name, "_linux_"+runtime.GOARCH):
			r.binary = name
		case strings.HasSuffix(name, "_linux_"+runtime.GOARCH+".tar.gz"):
			r.archive = name
		case strings.HasSuffix(name, "_"+runtime.GOARCH+".deb"):
			r.deb = name
		case name == "SHA256SUMS":
		default:
			t.Errorf("unexpected output %s", l)
		}
	}
	if r.binary == "" || r.archive == "" || r.deb == "" {
		t.Fatalf("scripts/release printed %q", out)
	}
	return r
}

// TestReleaseInstallsInThrowawayRoot is the release as a user gets it:
// scripts/release builds it, the files are what they promise, and the
// .deb installed into a throwaway root with dpkg runs.
func TestReleaseInstallsInThrowawayRoot(t *testing.T) {
	testenv.SkipShort(t, "takes 11s here")
	dpkg := testenv.Program(t, "dpkg")
	dpkgDeb := testenv.Program(t, "dpkg-deb")
	analyze := testenv.Program(t, "systemd-analyze")
	testenv.Program(t, "useradd") // the postinst's, in a root other than /
	gitHead := gitOutput(t, "rev-parse", "HEAD")
	pgURL := testenv.PostgresURL(t)

	r := runRelease(t)
	for _, step := range []string{"building linux/" + runtime.GOARCH, "generating man pages", "packaging ", "writing SHA256SUMS"} {
		if !strings.Contains(r.progress, "release: "+step) {
			t.Errorf("no progress line %q in:\n%s", step, r.progress)
		}
	}
	version := strings.TrimSuffix(strings.TrimPrefix(r.binary, "sluice_"), "_linux_"+runtime.GOARCH)
	checkSums(t, r)
	checkStatic(t, filepath.Join(r.dir, r.binary))
	checkArchive(t, filepath.Join(r.dir, r.archive), strings.TrimSuffix(r.archive, ".tar.gz"))
	deb := filepath.Join(r.dir, r.deb)
	checkDeb(t, dpkgDeb, deb)

	root := newRoot(t)
	install := exec.Command(dpkg, "--root="+root, "--force-not-root", "--force-script-chrootless",
		"--force-depends", "--log=/dev/null", "--install", deb)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("dpkg --install: %v\n%s", err, out)
	}
	if out, err := exec.Command(dpkg, "--root="+root, "--status", "sluice").CombinedOutput(); err != nil || !strings.Contains(string(out), "Status: install ok installed") {
		t.Fatalf("dpkg --status: %v\n%s", err, out)
	}
	checkInstalledFiles(t, root)
	for installed, src := range map[string]string{
		"etc/sluice/sluice.yaml":            "../examples/postgres-flow-control.yaml",
		"etc/default/sluice":                "sluice.default",
		"lib/systemd/system/sluice.service": "sluice.service",
	} {
		got, err1 := os.ReadFile(filepath.Join(root, installed))
		want, err2 := os.ReadFile(src)
		if err := errors.Join(err1, err2); err != nil || string(got) != string(want) {
			t.Errorf("/%s is not %s (%v)", installed, src, err)
		}
	}

	bin := filepath.Join(root, "usr/bin/sluice")
	out := run(t, bin, "version")
	if first := strings.SplitN(out, "\n", 2)[0]; first != "sluice "+version {
		t.Errorf("version prints %q first, want %q", first, "sluice "+version)
	}
	for _, want := range []string{"revision  " + gitHead, "\nbuilt     ", "\ngo        go1."} {
		if !strings.Contains(out, want) {
			t.Errorf("version lacks %q:\n%s", want, out)
		}
	}
	if out := run(t, bin, "bench", "--version"); !strings.HasPrefix(out, "sysbench 1.0.20") || !strings.Contains(out, version) {
		t.Errorf("bench --version = %q", out)
	}

	// The installed bash completion registers itself, and the binary
	// answers the completion requests it sends.
	compl := filepath.Join(root, "usr/share/bash-completion/completions/sluice")
	if out := run(t, testenv.Program(t, "bash"), "-c", `source "$1" && complete -p sluice`, "bash", compl); !strings.Contains(out, "-F __start_sluice sluice") {
		t.Errorf("bash completion registers %q", out)
	}
	if out := run(t, bin, "__complete", "se"); !strings.HasPrefix(out, "serve\t") {
		t.Errorf("sluice __complete se = %q", out)
	}

	serveInstalledConfig(t, bin, filepath.Join(root, "etc/sluice/sluice.yaml"), pgURL, version)

	verify := exec.Command(analyze, "verify", "--root="+root, "/lib/systemd/system/sluice.service")
	verify.Dir = t.TempDir()
	// Documentation=man:... is checked by running man: find the
	// installed pages.
	verify.Env = append(os.Environ(), "MANPATH="+filepath.Join(root, "usr/share/man"))
	if out, err := verify.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// newRoot makes a throwaway root for dpkg: an empty package database, a
// passwd database with root alone (the postinst adds sluice to it), the
// merged /usr layout of Debian 12, and the base system's pieces that
// systemd-analyze verify checks: the host's unit files (the targets the
// unit depends on) and /bin/kill (its ExecReload).
func newRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "etc", "usr/bin", "usr/lib/systemd/system"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []string{"bin", "lib"} {
		if err := os.Symlink("usr/"+l, filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"var/lib/dpkg/status": "",
		"etc/passwd":          "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":           "root:x:0:\n",
		"etc/shadow":          "",
		"etc/gshadow":         "",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	units, err := filepath.Glob("/usr/lib/systemd/system/*.target")
	if err != nil || len(units) == 0 {
		testenv.Missing(t, "systemd's unit files in /usr/lib/systemd/system (%v)", err)
	}
	for _, u := range append(units, "/usr/bin/kill") {
		dst := filepath.Join(root, strings.TrimPrefix(u, "/"))
		if err := copyFile(u, dst); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func copyFile(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, fi.Mode().Perm())
}

// checkSums recomputes SHA256SUMS.
func checkSums(t *testing.T, r release) {
	t.Helper()
	f, err := os.Open(filepath.Join(r.dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var listed []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q", sc.Text())
		}
		data, err := os.ReadFile(filepath.Join(r.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if h := sha256.Sum256(data); hex.EncodeToString(h[:]) != sum {
			t.Errorf("SHA256SUMS: %s does not match", name)
		}
		listed = append(listed, name)
	}
	for _, n := range []string{r.binary, r.archive, r.deb} {
		if !slices.Contains(listed, n) {
			t.Errorf("SHA256SUMS lacks %s", n)
		}
	}
}

// checkStatic fails unless the ELF binary at path asks for no dynamic
// loader and no shared library.
func checkStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has a PT_INTERP header: not static", path)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs shared libraries %q", path, libs)
	}
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]
	if f.Machine != want {
		t.Errorf("%s is for %v, want %v", path, f.Machine, want)
	}
}

// checkArchive lists the .tar.gz: everything under one directory named
// after it.
func checkArchive(t *testing.T, path, top string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		have[strings.TrimSuffix(h.Name, "/")] = true
	}
	for _, want := range []string{"sluice", "LICENSE", "README.md", "man/sluice.1.gz", "man/sluice-serve.1.gz",
		"man/sluice-bench.1.gz", "completion/bash/sluice", "completion/zsh/_sluice", "completion/fish/sluice.fish",
		"doc/config.md", "examples/latency-lab.yaml", "examples/postgres-flow-control.yaml", "examples/mysql-abort-rules.yaml",
		"systemd/sluice.service", "systemd/sluice.default"} {
		if !have[top+"/"+want] {
			t.Errorf("%s lacks %s/%s", filepath.Base(path), top, want)
		}
	}
}

func checkDeb(t *testing.T, dpkgDeb, deb string) {
	t.Helper()
	info := run(t, dpkgDeb, "--info", deb)
	for _, want := range []string{"Package: sluice", "Architecture: " + runtime.GOARCH, "Depends: adduser", " postinst ", " postrm ", " conffiles "} {
		if !strings.Contains(info, want) {
			t.Errorf("dpkg-deb --info lacks %q:\n%s", want, info)
		}
	}
	conffiles := run(t, dpkgDeb, "--info", deb, "conffiles")
	for _, want := range []string{"/etc/sluice/sluice.yaml", "/etc/default/sluice"} {
		if !slices.Contains(strings.Fields(conffiles), want) {
			t.Errorf("conffiles lack %s: %q", want, conffiles)
		}
	}
	listed := map[string]string{} // path: mode
	for _, l := range strings.Split(run(t, dpkgDeb, "--contents", deb), "\n") {
		f := strings.Fields(l)
		if len(f) >= 6 {
			listed[f[len(f)-1]] = f[0]
		}
	}
	// The paths the .deb promises, as dpkg-deb --contents lists them.
	for _, want := range []string{
		"./usr/bin/sluice",
		"./lib/systemd/system/sluice.service",
		"./etc/sluice/sluice.yaml",
		"./etc/default/sluice",
		"./var/lib/sluice/",
		"./usr/share/man/man1/sluice.1.gz",
		"./usr/share/man/man1/sluice-serve.1.gz",
		"./usr/share/man/man1/sluice-bench.1.gz",
		"./usr/share/man/man1/sluice-lab.1.gz",
		"./usr/share/man/man1/sluice-version.1.gz",
		"./usr/share/bash-completion/completions/sluice",
		"./usr/share/zsh/vendor-completions/_sluice",
		"./usr/share/fish/vendor_completions.d/sluice.fish",
		"./usr/share/doc/sluice/copyright",
		"./usr/share/doc/sluice/doc/config.md",
	} {
		if _, ok := listed[want]; !ok {
			t.Errorf("dpkg-deb --contents lacks %s", want)
		}
	}
	for path, mode := range map[string]string{"./usr/bin/sluice": "-rwxr-xr-x", "./etc/default/sluice": "-rw-r-----", "./etc/sluice/sluice.yaml": "-rw-r-----"} {
		if listed[path] != mode {
			t.Errorf("%s has mode %s, want %s", path, listed[path], mode)
		}
	}
	license, err := os.ReadFile("../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, dpkgDeb, "--fsys-tarfile", deb); !strings.Contains(got, string(license)) {
		t.Error("the .deb's copyright is not LICENSE")
	}
}

// checkInstalledFiles checks what the postinst did in root: the user
// sluice in root's own passwd database, owning the catalog directory, and
// the configuration and the secrets readable by its group only.
func checkInstalledFiles(t *testing.T, root string) {
	t.Helper()
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil {
		t.Fatal(err)
	}
	var uid, gid = -1, -1
	for _, l := range strings.Split(string(passwd), "\n") {
		f := strings.Split(l, ":")
		if len(f) == 7 && f[0] == "sluice" {
			uid, _ = strconv.Atoi(f[2])
			gid, _ = strconv.Atoi(f[3])
			if f[6] != "/usr/sbin/nologin" || uid == 0 {
				t.Errorf("user sluice: %q", l)
			}
		}
	}
	if uid < 0 {
		t.Fatalf("postinst made no user sluice:\n%s", passwd)
	}
	for path, want := range map[string]struct {
		uid, gid int
		mode     os.FileMode
	}{
		"var/lib/sluice":         {uid, gid, os.ModeDir | 0o750},
		"etc/sluice":             {0, gid, os.ModeDir | 0o750},
		"etc/sluice/sluice.yaml": {0, gid, 0o640},
		"etc/default/sluice":     {0, gid, 0o640},
	} {
		fi, err := os.Lstat(filepath.Join(root, path))
		if err != nil {
			t.Error(err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != want.uid || int(st.Gid) != want.gid || fi.Mode() != want.mode {
			t.Errorf("/%s: %d:%d %v, want %d:%d %v", path, st.Uid, st.Gid, fi.Mode(), want.uid, want.gid, want.mode)
		}
	}
}

// serveInstalledConfig runs the installed binary on a copy of the
// installed configuration whose route leads to the test PostgreSQL (and
// whose addresses are free loopback ports, the catalog in a temporary
// directory), queries PostgreSQL through it with pgx, asks its HTTP API
// for the version (which must be version), and stops it with SIGTERM, as
// systemctl stop does.
func serveInstalledConfig(t *testing.T, bin, conf, pgURL, version string) {
	t.Helper()
	data, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	pc, err := pgx.ParseConfig(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	routes, _ := doc["routes"].([]any)
	if len(routes) != 1 {
		t.Fatalf("installed config has routes %v, want one", doc["routes"])
	}
	route := routes[0].(map[string]any)
	if route["protocol"] != "postgres" {
		t.Fatalf("installed config's route is %v", route)
	}
	route["listen"] = "127.0.0.1:0"
	route["upstream"] = fmt.Sprintf("%s:%d", pc.Host, pc.Port)
	for _, k := range []string{"admin", "http"} {
		if m, ok := doc[k].(map[string]any); ok {
			m["listen"] = "127.0.0.1:0"
		}
	}
	doc["catalog"] = filepath.Join(t.TempDir(), "catalog.json")
	doc["shutdown_grace"] = "1s"
	data, err = yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(copyPath, data, 0o640); err != nil {
		t.Fatal(err)
	}

	var logs testenv.Buffer
	cmd := exec.Command(bin, "serve", "--config", copyPath, "--log-format", "json")
	cmd.Env = append(os.Environ(), "SLUICE_ADMIN_PASSWORD=install-test-pw", "SLUICE_HTTP_TOKEN=install-test-token")
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cmd.Process.Kill()
			<-exited
		}
	})
	var listen, api string
	testenv.Eventually(t, 30*time.Second, "the route and the HTTP API listening in the log", func() bool {
		for _, l := range strings.Split(logs.String(), "\n") {
			var rec struct{ Msg, Listen string }
			if json.Unmarshal([]byte(l), &rec) == nil {
				switch rec.Msg {
				case "route listening":
					listen = rec.Listen
				case "HTTP API listening":
					api = rec.Listen
				}
			}
		}
		if listen != "" && api != "" {
			return true
		}
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("sluice serve exited: %v\n%s", err, logs.String())
		default:
		}
		return false
	})
	host, port, ok := strings.Cut(listen, ":")
	p, err := strconv.ParseUint(port, 10, 16)
	if !ok || err != nil {
		t.Fatalf("route listens on %q", listen)
	}
	pc.Host, pc.Port = host, uint16(p)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		t.Fatalf("connect through the installed sluice: %v\n%s", err, logs.String())
	}
	var n int
	err = c.QueryRow(ctx, "SELECT 41 + 1").Scan(&n)
	c.Close(ctx)
	if err != nil || n != 42 {
		t.Fatalf("query through the installed sluice: %d, %v", n, err)
	}
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+api+"/version", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer install-test-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != version {
		t.Errorf("GET /version: %s %q, %v; want %q", resp.Status, body, err, version)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if err := <-exited; err != nil {
		t.Fatalf("sluice serve after SIGTERM: %v\n%s", err, logs.String())
	}
}

// run runs a program and returns its standard output.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("%s %q: %v\n%s", name, args, err, stderr)
	}
	return string(out)
}

func gitOutput(t *testing.T, args ...string) string {
	t.Helper()
	return strings.TrimSpace(run(t, testenv.Program(t, "git"), args...))
}
