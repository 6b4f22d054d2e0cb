"""GPU monitoring: NVIDIA's DCGM exporter, kube-state-metrics, Prometheus with the GPU
alerts, Grafana with the GPU dashboard (config/monitoring.py)."""
