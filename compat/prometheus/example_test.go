package ucxprom_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	ucxprom "github.com/ucxnet/ucxnet/compat/prometheus"
	"github.com/ucxnet/ucxnet/registry"
	"github.com/ucxnet/ucxnet/ucxnet"
)

// An exporter: the Collector registered in a Prometheus registry, served
// on /metrics, and scraped over HTTP after one conn between two transports.
func Example() {
	reg := registry.NewMemory()
	server, err := ucxnet.NewTransport(ucxnet.Config{Registry: reg, Name: "orders-server", StatsDir: ucxnet.StatsOff})
	if err != nil {
		panic(err)
	}
	defer server.Close()
	client, err := ucxnet.NewTransport(ucxnet.Config{Registry: reg, Name: "orders-client", StatsDir: ucxnet.StatsOff})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	// The exporter.
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(ucxprom.NewCollector(server, client)) // or NewCollector(): every transport
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(metrics, promhttp.HandlerOpts{}))
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer hl.Close()
	go http.Serve(hl, mux)

	// One conn.
	lc := ucxnet.ListenConfig{Transport: server}
	ln, err := lc.Listen(context.Background(), ucxnet.Network, "orders")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			c.Write([]byte("hello"))
		}
	}()
	d := ucxnet.Dialer{Transport: client}
	c, err := d.Dial(ucxnet.Network, "orders")
	if err != nil {
		panic(err)
	}
	defer c.Close()
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil {
		panic(err)
	}

	// The scrape.
	resp, err := http.Get("http://" + hl.Addr().String() + "/metrics")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "ucxnet_dials_total") || strings.HasPrefix(line, "ucxnet_accepts_total") || strings.HasPrefix(line, "ucxnet_listeners") {
			fmt.Println(line)
		}
	}
	// Output:
	// ucxnet_accepts_total{ucxnet_transport="orders-client"} 0
	// ucxnet_accepts_total{ucxnet_transport="orders-server"} 1
	// ucxnet_dials_total{ucxnet_transport="orders-client"} 1
	// ucxnet_dials_total{ucxnet_transport="orders-server"} 0
	// ucxnet_listeners{ucxnet_transport="orders-client"} 0
	// ucxnet_listeners{ucxnet_transport="orders-server"} 1
}
