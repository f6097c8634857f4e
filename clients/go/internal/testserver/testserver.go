// Package testserver starts the ranking server binary named by RANKING_SERVER_BIN for a
// test: its own SQLite file and port, the tokens below, stopped when the test ends.
package testserver

import (
	"context"
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
	"syscall"
	"testing"
	"time"

	ranking "ranking-service/clients/go"
	"ranking-service/clients/go/rankingv1"
)

// The tokens the server is started with.
const (
	ReadToken  = "go-client-read"
	WriteToken = "go-client-write"
	AdminToken = "go-client-admin"
)

// Start runs the server with env on top of the defaults and waits until it answers.
// Without RANKING_SERVER_BIN the test fails: it cannot be run without the server.
func Start(t *testing.T, env ...string) (endpoint string) {
	t.Helper()
	return start(t, nil, env)
}

// StartTLS runs the server on TLS with a certificate made for the test (127.0.0.1), and
// returns the PEM file a client trusts it by.
func StartTLS(t *testing.T) (endpoint, caPath string) {
	t.Helper()
	certPath, keyPath := selfSigned(t)
	config, err := ranking.TLSFromCA(certPath)
	if err != nil {
		t.Fatal(err)
	}
	return start(t, config, []string{"RANKING_TLS_CERT=" + certPath, "RANKING_TLS_KEY=" + keyPath}), certPath
}

func start(t *testing.T, tlsConfig *tls.Config, env []string) (endpoint string) {
	t.Helper()
	bin := os.Getenv("RANKING_SERVER_BIN")
	if bin == "" {
		t.Fatal("RANKING_SERVER_BIN names the ranking server binary the client is tested against")
	}
	dir := t.TempDir()
	endpoint = "127.0.0.1:" + strconv.Itoa(freePort(t))
	cmd := exec.Command(bin)
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"RANKING_LISTEN=" + endpoint,
		"DATABASE_URL=sqlite://" + filepath.Join(dir, "ranking.db") + "?mode=rwc",
		"RANKING_READ_TOKEN=" + ReadToken,
		"RANKING_WRITE_TOKEN=" + WriteToken,
		"RANKING_ADMIN_TOKEN=" + AdminToken,
		"RANKING_SHUTDOWN_GRACE=1s",
		"RANKING_METRICS_LISTEN=",
		"RUST_LOG=warn",
	}, env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	probe, err := ranking.Dial(ranking.Options{Endpoint: endpoint, TLS: tlsConfig})
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := probe.GetAccess(ctx, &rankingv1.GetAccessRequest{})
		cancel()
		if err == nil {
			return endpoint
		}
		select {
		case <-exited:
			t.Fatalf("the server exited before it answered: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not answer within 60 s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// selfSigned writes a certificate for 127.0.0.1 and its key as PEM files.
func selfSigned(t *testing.T) (certPath, keyPath string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "ranking test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath
}
