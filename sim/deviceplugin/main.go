// Command gpupoc-device-plugin is the sim's own device plugin for its real nodes: it speaks the kubelet's real
// device-plugin API (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1) and advertises simulated GPUs. It registers
// with the kubelet (Register on kubelet.sock), lists its devices (ListAndWatch), and in Allocate hands a container
// the IDs it got in NVIDIA_VISIBLE_DEVICES, as NVIDIA's plugin does. The devices are simulated; the kubelet, its
// accounting of nvidia.com/gpu and the container that receives the variable are real.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const (
	reRegisterPoll = 2 * time.Second
	socketPoll     = 100 * time.Millisecond
)

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	devices []*pluginapi.Device
	stop    chan struct{}
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends the devices once (they never change health) and holds the stream open until the plugin stops.
func (p *plugin) ListAndWatch(_ *pluginapi.Empty, stream pluginapi.DevicePlugin_ListAndWatchServer) error {
	if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	select {
	case <-p.stop:
	case <-stream.Context().Done():
	}
	return nil
}

// Allocate gives each container the device IDs the kubelet chose for it, as NVIDIA's plugin does.
func (p *plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		ids := strings.Join(c.DevicesIds, ",")
		log.Printf("allocate: %s", ids)
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs:        map[string]string{"NVIDIA_VISIBLE_DEVICES": ids},
			Annotations: map[string]string{"sim.gpupoc.io/gpus": "simulated"},
		})
	}
	return resp, nil
}

func (p *plugin) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{}, nil
}

func (p *plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

func register(dir, endpoint, resource string) error {
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, filepath.Base(pluginapi.KubeletSocket)),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: endpoint, ResourceName: resource})
	return err
}

// waitForKubelet returns the kubelet's registration socket once it is there: the kubelet empties its directory
// before it listens, so a plugin socket made earlier would be removed under the plugin.
func waitForKubelet(kubelet string, done <-chan os.Signal) (os.FileInfo, bool) {
	logged := false
	for {
		if info, err := os.Stat(kubelet); err == nil {
			return info, true
		}
		if !logged {
			log.Printf("waiting for the kubelet's socket %s", kubelet)
			logged = true
		}
		select {
		case <-done:
			return nil, false
		case <-time.After(socketPoll):
		}
	}
}

// serve listens on the plugin's socket and registers; it returns true when the kubelet's socket is replaced or the
// plugin's own is removed (the kubelet restarted and emptied its directory), so that main serves and registers again.
func serve(dir, endpoint, resource string, devices []*pluginapi.Device, done <-chan os.Signal) bool {
	kubelet := filepath.Join(dir, filepath.Base(pluginapi.KubeletSocket))
	kubeletInfo, ok := waitForKubelet(kubelet, done)
	if !ok {
		return false
	}
	socket := filepath.Join(dir, endpoint)
	_ = os.Remove(socket)
	listener, err := net.Listen("unix", socket)
	if err != nil {
		log.Fatalf("listen on %s: %v", socket, err)
	}
	p := &plugin{devices: devices, stop: make(chan struct{})}
	server := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(server, p)
	go func() { _ = server.Serve(listener) }()
	defer func() { close(p.stop); server.Stop(); _ = os.Remove(socket) }()
	registered := false
	for {
		if !registered {
			if err := register(dir, endpoint, resource); err != nil {
				log.Printf("register with the kubelet: %v (retrying)", err)
			} else {
				registered = true
				log.Printf("registered %s: %d device(s) on %s", resource, len(devices), socket)
			}
		}
		if info, err := os.Stat(kubelet); err != nil || !os.SameFile(info, kubeletInfo) {
			log.Printf("the kubelet's socket was replaced: registering again")
			return true
		}
		if _, err := os.Stat(socket); err != nil {
			log.Printf("%s was removed: listening and registering again", socket)
			return true
		}
		select {
		case <-done:
			return false
		case <-time.After(reRegisterPoll):
		}
	}
}

func main() {
	dir := flag.String("socket-dir", filepath.Dir(pluginapi.KubeletSocket), "the kubelet's device-plugin directory")
	resource := flag.String("resource", "nvidia.com/gpu", "the extended resource advertised")
	count := flag.Int("count", 8, "simulated devices")
	node := flag.String("node", "", "the node's name (in the device IDs)")
	version := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *version {
		fmt.Println("gpupoc-device-plugin 1 (deviceplugin/v1beta1; devices simulated)")
		return
	}
	devices := make([]*pluginapi.Device, *count)
	for i := range devices {
		devices[i] = &pluginapi.Device{ID: fmt.Sprintf("GPU-sim-%s-%d", *node, i), Health: pluginapi.Healthy}
	}
	done := make(chan os.Signal, 1)
	signal.Notify(done, syscall.SIGINT, syscall.SIGTERM)
	for serve(*dir, "gpupoc-gpu.sock", *resource, devices, done) {
	}
}
