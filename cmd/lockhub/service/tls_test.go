package service

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/lockhub/lockhub/locks/redistest"
)

// testCA makes a CA and a server certificate it signs for 127.0.0.1, and writes
// ca.pem, server.pem and server.key into dir.
func testCA(t *testing.T, dir string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lockhub test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]*pem.Block{
		"ca.pem":     {Type: "CERTIFICATE", Bytes: caDER},
		"server.pem": {Type: "CERTIFICATE", Bytes: leafDER},
		"server.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// startTLSRedis starts a redis-server that listens only on TLS, on a free loopback
// port, with the certificates of testCA in dir, and returns its address. The test's
// cleanup kills it.
func startTLSRedis(t *testing.T, dir string) string {
	t.Helper()
	bin := redistest.RequireRedisServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close() // redis-server takes it next; a race with another process fails the start below
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command(bin, "--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", filepath.Join(dir, "server.pem"), "--tls-key-file", filepath.Join(dir, "server.key"),
		"--tls-ca-cert-file", filepath.Join(dir, "ca.pem"), "--tls-auth-clients", "no",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	pool.AppendCertsFromPEM(caPEM)
	redistest.Within(t, 10*time.Second, "redis-server answering on TLS", func() error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		if err != nil {
			return err
		}
		return c.Close()
	})
	return addr
}

// TestRedisTLS runs lockhub on a redis-server that speaks only TLS, as Azure Managed
// Redis does on port 10000: with --redis-ca-file naming the server's CA, claims
// succeed; without it, the server's certificate is not trusted, and lockhub fails
// open and says it is not ready.
func TestRedisTLS(t *testing.T) {
	dir := t.TempDir()
	testCA(t, dir)
	addr := startTLSRedis(t, dir)
	url := "rediss://" + addr

	r := start(t, []string{"--dev", "--redis-url", url}, env("LOCKHUB_REDIS_CA_FILE", filepath.Join(dir, "ca.pem")))
	ada := devToken(t, r.url, "u-ada")
	if a := call(t, "POST", r.url+"/api/locks/ApprovalRequest/r-1", ada, ""); a.status != 200 || a.body["outcome"] != "acquired" {
		t.Fatalf("claim over TLS: %d %s\n%s", a.status, a.raw, r.logs)
	}
	if a := call(t, "GET", r.url+"/readyz", "", ""); a.status != 200 {
		t.Fatalf("readyz over TLS: %d %s", a.status, a.raw)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}

	untrusted := start(t, []string{"--dev", "--redis-url", url}, env())
	if a := call(t, "POST", untrusted.url+"/api/locks/ApprovalRequest/r-2", devToken(t, untrusted.url, "u-ada"), ""); a.status != 200 || a.body["outcome"] != "unknown" {
		t.Fatalf("claim with the server's CA untrusted: %d %s", a.status, a.raw)
	}
	if a := call(t, "GET", untrusted.url+"/readyz", "", ""); a.status != 503 {
		t.Fatalf("readyz with the server's CA untrusted: %d %s", a.status, a.raw)
	}
	if err := untrusted.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
