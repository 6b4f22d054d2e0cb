#!/usr/bin/env bats
# install-nvidia.sh: driver, container toolkit, containerd runtime drop-in.

bats_require_minimum_version 1.5.0
load helpers

DROPIN_CONTENT='# Managed by gpu-cluster.
version = 3

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]
  BinaryName = "/usr/bin/nvidia-container-runtime"'

# The fingerprint of the key NVIDIA serves (config/versions.py), which the stub serves.
PINNED_KEY=C95B321B61E88C1809C4F759DDCAE044F796ECB0
# The CUDA repository's RPM key (config/versions.py), for EL9's driver.
CUDA_KEY=610C7B14E068A878070DA4E99CD0A493D42D0685
KEYRING=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg
SOURCES=/etc/apt/sources.list.d/nvidia-container-toolkit.list

# real_key NAME: a throwaway OpenPGP key made by the real gpg, armored at
# $BATS_FILE_TMPDIR/NAME.asc; prints its fingerprint.
real_key() {
  local home="$BATS_FILE_TMPDIR/gnupg-$1"
  if [[ ! -f "$BATS_FILE_TMPDIR/$1.asc" ]]; then
    mkdir -p "$home" && chmod 0700 "$home"
    GNUPGHOME="$home" /usr/bin/gpg --batch --quiet --passphrase '' \
      --quick-generate-key "$1 <$1@example.com>" ed25519 sign never 2>/dev/null
    GNUPGHOME="$home" /usr/bin/gpg --batch --armor --export >"$BATS_FILE_TMPDIR/$1.asc"
  fi
  GNUPGHOME="$home" /usr/bin/gpg --batch --with-colons --list-keys |
    awk -F: '$1 == "fpr" { print $10; exit }'
}

setup() {
  setup_host
  export NVIDIA_REPO_KEY_FINGERPRINT=$PINNED_KEY NVIDIA_CUDA_REPO_KEY_FINGERPRINT=$CUDA_KEY
  export NVIDIA_DRIVER_BRANCH=580 NVIDIA_CONTAINER_TOOLKIT_VERSION=1.19.1-1 \
    CONTAINERD_DROPIN_PATH=/etc/k0s/containerd.d/nvidia.toml \
    CONTAINERD_DROPIN_CONTENT="$DROPIN_CONTENT"
}

@test "install-nvidia: nvidia.aptMirror: the key and packages from the site's mirror, key still pinned" {
  export NVIDIA_APT_MIRROR=https://apt.example.internal/nvidia
  run_script install-nvidia.sh
  assert_success
  assert_called '^curl -fsSL --retry 5 -o [^ ]+/gpgkey https://apt.example.internal/nvidia/gpgkey$'
  refute_called 'nvidia\.github\.io'
  # shellcheck disable=SC2016 # apt expands $(ARCH), so it stays literal
  assert_file /etc/apt/sources.list.d/nvidia-container-toolkit.list \
    'deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] https://apt.example.internal/nvidia/stable/deb/$(ARCH) /'
}

@test "install-nvidia: installs driver, toolkit and runtime on a fresh GPU host" {
  run_script install-nvidia.sh
  assert_success

  assert_called "^$APT "'install -y --allow-change-held-packages nvidia-headless-580-server nvidia-utils-580-server$'
  assert_called '^apt-mark hold nvidia-headless-580-server nvidia-utils-580-server$'
  assert_called '^modprobe nvidia$'
  [ ! -e "$GPU_CLUSTER_ROOT/var/run/reboot-required" ]

  assert_called '^curl -fsSL --retry 5 -o [^ ]+/gpgkey https://nvidia.github.io/libnvidia-container/gpgkey$'
  assert_called '^gpg --batch --yes --dearmor -o '
  [ "$(head -n 1 "$GPU_CLUSTER_ROOT/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg")" = stub-dearmored ]
  assert_mode /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg 644
  # shellcheck disable=SC2016 # apt expands $(ARCH), so it stays literal
  assert_file /etc/apt/sources.list.d/nvidia-container-toolkit.list \
    'deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /'
  [ "$(grep -c ' update$' "$STUB_CALLS")" -eq 1 ]
  assert_called "^$APT "'install -y --allow-downgrades --allow-change-held-packages nvidia-container-toolkit=1\.19\.1-1 nvidia-container-toolkit-base=1\.19\.1-1 libnvidia-container-tools=1\.19\.1-1 libnvidia-container1=1\.19\.1-1$'
  assert_called '^apt-mark hold nvidia-container-toolkit nvidia-container-toolkit-base libnvidia-container-tools libnvidia-container1$'

  assert_file /etc/k0s/containerd.d/nvidia.toml "$DROPIN_CONTENT"
  assert_mode /etc/k0s/containerd.d/nvidia.toml 644
  refute_called '^(update-initramfs|systemctl)'
}

@test "install-nvidia: a second run changes nothing and says so" {
  run_twice install-nvidia.sh
  assert_output_contains \
    "NVIDIA driver 580.95.05 is already installed and loaded (branch 580)" \
    "unchanged /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg" \
    "unchanged /etc/apt/sources.list.d/nvidia-container-toolkit.list" \
    "NVIDIA Container Toolkit 1.19.1-1 is already installed" \
    "unchanged /etc/k0s/containerd.d/nvidia.toml"
}

@test "install-nvidia: checks the repository key against the pinned fingerprint before trusting it" {
  run_script install-nvidia.sh
  assert_success
  assert_called "^gpg --batch --show-keys --with-colons -- [^ ]+/gpgkey$"
  assert_call_order '/gpgkey$' '^gpg --batch --show-keys' '^gpg --batch --yes --dearmor'
}

@test "install-nvidia: another key at NVIDIA's URL is refused and nothing is trusted" {
  export STUB_NVIDIA_KEY_FINGERPRINT=0123456789ABCDEF0123456789ABCDEF01234567
  run_script install-nvidia.sh
  assert_failure
  assert_output_contains "install-nvidia: https://nvidia.github.io/libnvidia-container/gpgkey is not the pinned key $PINNED_KEY (found: 0123456789ABCDEF0123456789ABCDEF01234567); nothing trusted"
  [ ! -e "$GPU_CLUSTER_ROOT$KEYRING" ]
  [ ! -e "$GPU_CLUSTER_ROOT$SOURCES" ]
  refute_called '^gpg --batch --yes --dearmor|nvidia-container-toolkit='
}

@test "install-nvidia: the pinned key with another key beside it is refused" {
  export STUB_NVIDIA_GPGKEY_FILE="$BATS_TEST_TMPDIR/two-keys.asc"
  printf -- '-----BEGIN PGP PUBLIC KEY BLOCK-----\nstub key %s\nstub key %s\n-----END PGP PUBLIC KEY BLOCK-----\n' \
    "$PINNED_KEY" 0123456789ABCDEF0123456789ABCDEF01234567 >"$STUB_NVIDIA_GPGKEY_FILE"
  run_script install-nvidia.sh
  assert_failure
  assert_output_contains "is not the pinned key $PINNED_KEY (found: $PINNED_KEY 0123456789ABCDEF0123456789ABCDEF01234567)"
  [ ! -e "$GPU_CLUSTER_ROOT$KEYRING" ]
}

@test "install-nvidia: a keyring trusted earlier with another key is replaced by the pinned one" {
  mkdir -p "$GPU_CLUSTER_ROOT/usr/share/keyrings"
  printf 'stub-dearmored\nstub key 0123456789ABCDEF0123456789ABCDEF01234567\n' >"$GPU_CLUSTER_ROOT$KEYRING"
  run_script install-nvidia.sh
  assert_success
  assert_output_contains "$KEYRING does not hold exactly the pinned key $PINNED_KEY; replacing it" "changed $KEYRING"
  grep -qx "stub key $PINNED_KEY" "$GPU_CLUSTER_ROOT$KEYRING"
}

@test "install-nvidia: a fingerprint that is not 40 upper-case hex digits is refused" {
  export NVIDIA_REPO_KEY_FINGERPRINT="${PINNED_KEY,,}"
  run_script install-nvidia.sh
  assert_failure
  assert_output_contains "NVIDIA_REPO_KEY_FINGERPRINT must be an OpenPGP v4 fingerprint"
  assert_no_state_changes
}

@test "install-nvidia: with real gpg and real keys, the pinned key is trusted and another is not" {
  local pinned other
  pinned="$(real_key pinned)"
  other="$(real_key other)"
  export STUB_NVIDIA_GPGKEY_FILE="$BATS_FILE_TMPDIR/pinned.asc" NVIDIA_REPO_KEY_FINGERPRINT=$pinned
  run_script install-nvidia.sh
  assert_success
  # The keyring apt reads is the real gpg's dearmored key: it lists the pinned key alone.
  [ "$(/usr/bin/gpg --batch --show-keys --with-colons "$GPU_CLUSTER_ROOT$KEYRING" | awk -F: '$1 == "pub"' | wc -l)" -eq 1 ]
  run_script install-nvidia.sh
  assert_success
  assert_output_contains "unchanged $KEYRING (key $pinned)"

  export NVIDIA_REPO_KEY_FINGERPRINT=$other
  run_script install-nvidia.sh
  assert_failure
  assert_output_contains "is not the pinned key $other (found: $pinned); nothing trusted"
}

# toolkit_setting KEY: KEY's value in the toolkit's config as a TOML parser reads it.
toolkit_setting() {
  "${GPU_CLUSTER_PYTHON:-/usr/bin/python3}" -c 'import sys, tomllib
with open(sys.argv[1], "rb") as config:
    print(str(tomllib.load(config).get(sys.argv[2])).lower())' \
    "$GPU_CLUSTER_ROOT/etc/nvidia-container-runtime/config.toml" "$1"
}

@test "install-nvidia: the toolkit ignores NVIDIA_VISIBLE_DEVICES of unprivileged containers" {
  run_script install-nvidia.sh
  assert_success
  assert_called '^nvidia-ctk --quiet config --config-file=[^ ]*/etc/nvidia-container-runtime/config\.toml --set accept-nvidia-visible-devices-envvar-when-unprivileged=false --set accept-nvidia-visible-devices-as-volume-mounts=true --output=[^ ]+$'
  [ "$(toolkit_setting accept-nvidia-visible-devices-envvar-when-unprivileged)" = false ]
  [ "$(toolkit_setting accept-nvidia-visible-devices-as-volume-mounts)" = true ]
  # The package's other settings stay.
  [ "$(toolkit_setting disable-require)" = false ]
  grep -qx 'ldconfig = "@/sbin/ldconfig.real"' "$GPU_CLUSTER_ROOT/etc/nvidia-container-runtime/config.toml"
  assert_mode /etc/nvidia-container-runtime/config.toml 644
  assert_idempotent install-nvidia.sh
  assert_output_contains "unchanged /etc/nvidia-container-runtime/config.toml"

  # Set back by hand (or by a package that rewrote it): the next run sets it again.
  sed -i 's/^accept-nvidia-visible-devices-envvar-when-unprivileged = false/accept-nvidia-visible-devices-envvar-when-unprivileged = true/' \
    "$GPU_CLUSTER_ROOT/etc/nvidia-container-runtime/config.toml"
  [ "$(toolkit_setting accept-nvidia-visible-devices-envvar-when-unprivileged)" = true ]
  run_script install-nvidia.sh
  assert_success
  assert_output_contains "changed /etc/nvidia-container-runtime/config.toml"
  [ "$(toolkit_setting accept-nvidia-visible-devices-envvar-when-unprivileged)" = false ]
}

@test "install-nvidia: with nouveau loaded it blacklists it and asks for a reboot" {
  mkdir -p "$GPU_CLUSTER_ROOT/sys/module/nouveau"
  run_script install-nvidia.sh
  assert_success
  assert_file /etc/modprobe.d/gpu-cluster-blacklist-nouveau.conf '# Managed by gpu-cluster (install-nvidia): the NVIDIA driver cannot load while
# nouveau drives the GPUs.
blacklist nouveau
options nouveau modeset=0'
  assert_called '^update-initramfs -u$'
  refute_called '^modprobe'
  assert_file /var/run/reboot-required '*** System restart required ***'
  assert_output_contains "reboot required: nouveau is loaded; the NVIDIA driver loads after the next reboot"
  # Until the reboot, re-runs neither reinstall nor rebuild anything.
  assert_idempotent install-nvidia.sh
}

@test "install-nvidia: a driver of the configured branch is left alone" {
  echo 580.82.07 >"$STUB_STATE/nvidia-driver-version"
  mkdir -p "$GPU_CLUSTER_ROOT/sys/module/nvidia"
  run_script install-nvidia.sh
  assert_success
  assert_output_contains "NVIDIA driver 580.82.07 is already installed and loaded (branch 580)"
  refute_called 'nvidia-headless|^modprobe'
}

@test "install-nvidia: a different toolkit version is installed pinned" {
  run_again_with install-nvidia.sh NVIDIA_CONTAINER_TOOLKIT_VERSION=1.18.0-1
  assert_success
  assert_called 'install -y --allow-downgrades --allow-change-held-packages nvidia-container-toolkit=1\.18\.0-1 nvidia-container-toolkit-base=1\.18\.0-1 libnvidia-container-tools=1\.18\.0-1 libnvidia-container1=1\.18\.0-1$'
  assert_output_contains "changed: installed NVIDIA Container Toolkit 1.18.0-1 (was 1.19.1-1)"
  refute_called '^(curl|gpg --batch --yes)|nvidia-headless'
}

@test "install-nvidia: a changed runtime drop-in is rewritten, nothing else" {
  first_run install-nvidia.sh
  export CONTAINERD_DROPIN_CONTENT="$DROPIN_CONTENT
  # changed"
  run_script install-nvidia.sh
  assert_success
  assert_output_contains "changed /etc/k0s/containerd.d/nvidia.toml"
  assert_no_state_changes
}

@test "install-nvidia: all missing environment variables are named at once" {
  unset NVIDIA_DRIVER_BRANCH CONTAINERD_DROPIN_CONTENT
  run_script install-nvidia.sh
  assert_refused "gpu-cluster: moscow: install-nvidia: missing required environment variable(s): NVIDIA_DRIVER_BRANCH CONTAINERD_DROPIN_CONTENT"
}

@test "install-nvidia: an empty drop-in (RKE2 adds the runtime itself) writes none, twice the same" {
  export CONTAINERD_DROPIN_PATH=/var/lib/rancher/rke2/agent/etc/containerd/nvidia.toml \
    CONTAINERD_DROPIN_CONTENT=
  run_script install-nvidia.sh
  assert_success
  assert_called "^$APT "'install -y --allow-downgrades --allow-change-held-packages nvidia-container-toolkit=1\.19\.1-1 '
  [ ! -e "$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/agent/etc/containerd/nvidia.toml" ]
  assert_output_contains "no containerd drop-in: the distribution adds the nvidia runtime itself"
  assert_idempotent install-nvidia.sh
}

@test "install-nvidia: a relative drop-in path is rejected" {
  export CONTAINERD_DROPIN_PATH=../etc/nvidia.toml
  run_script install-nvidia.sh
  assert_failure
  assert_output_contains "CONTAINERD_DROPIN_PATH must be an absolute path"
}

@test "install-nvidia: with INSTALL_DRIVER=false the image's driver is left alone" {
  export INSTALL_DRIVER=false
  run_script install-nvidia.sh
  assert_success
  refute_called 'nvidia-headless|modprobe nvidia'
  assert_output_contains "the NVIDIA driver is the host's own and is kept (INSTALL_DRIVER=false): none answers yet"
  assert_file /etc/k0s/containerd.d/nvidia.toml "$DROPIN_CONTENT"
}

# Fabric Manager and NSCQ, as the stubbed archive has them for driver 580.95.05.
FM_PIN='nvidia-fabricmanager-580=580\.95\.05-\* libnvidia-nscq-580=580\.95\.05-\*'
FM_RULE='ACTION=="add", DEVPATH=="/bus/pci/drivers/nvidia", RUN+="/usr/bin/nvidia-ctk system create-dev-char-symlinks --create-all"'

@test "install-nvidia: links the device nodes with nvidia-ctk and writes NVIDIA's udev rule" {
  run_script install-nvidia.sh
  assert_success
  # NVIDIA's rule, verbatim (NVIDIA/nvidia-docker#1671; gpu-operator#485, workaround 1).
  [ "$(grep -v '^#' "$GPU_CLUSTER_ROOT/etc/udev/rules.d/71-nvidia-dev-char.rules")" = "$FM_RULE" ]
  assert_mode /etc/udev/rules.d/71-nvidia-dev-char.rules 644
  assert_called '^nvidia-ctk system create-dev-char-symlinks --create-all$'
  assert_call_order '^modprobe nvidia$' '^nvidia-ctk system create-dev-char-symlinks'
  for link in 195:255 195:254 195:0 195:1; do
    [ -L "$GPU_CLUSTER_ROOT/dev/char/$link" ]
  done
  refute_gpu_detached
  assert_idempotent install-nvidia.sh
  assert_output_contains "unchanged: the NVIDIA device nodes are linked in /dev/char"
}

@test "install-nvidia: a running GPU node's toolkit upgrade links its devices before apt-get" {
  installed_package nvidia-headless-580-server 580.95.05-0ubuntu0.24.04.1
  installed_package nvidia-utils-580-server 580.95.05-0ubuntu0.24.04.1
  installed_package nvidia-kernel-common-580-server 580.95.05-0ubuntu0.24.04.1
  installed_package nvidia-container-toolkit 1.18.0-1
  installed_package nvidia-container-toolkit-base 1.18.0-1
  nvidia_driver_loaded 580.95.05
  run_script install-nvidia.sh
  assert_success
  assert_call_order '^nvidia-ctk system create-dev-char-symlinks' "^$APT install .*nvidia-container-toolkit=1\\.19\\.1-1"
  refute_gpu_detached
}

@test "install-nvidia: on an HGX board Fabric Manager and NSCQ come at the driver's exact version, held, enabled and running" {
  add_nvswitches 6
  run_script install-nvidia.sh
  assert_success
  assert_output_contains "6 NVSwitch(es) on the PCI bus: CUDA needs Fabric Manager"
  assert_called "^$APT install -y --allow-downgrades --allow-change-held-packages $FM_PIN\$"
  [ "$(<"$STUB_STATE/dpkg/nvidia-fabricmanager-580")" = 580.95.05-0ubuntu0.24.04.1 ]
  [ "$(<"$STUB_STATE/dpkg/libnvidia-nscq-580")" = 580.95.05-0ubuntu0.24.04.1 ]
  assert_called '^apt-mark hold nvidia-fabricmanager-580 libnvidia-nscq-580$'
  assert_called '^systemctl enable nvidia-fabricmanager\.service$'
  assert_called '^systemctl start nvidia-fabricmanager\.service$'
  assert_call_order "^$APT install .*nvidia-headless-580-server" "^$APT install .*nvidia-fabricmanager-580"
  assert_call_order "^$APT install .*nvidia-fabricmanager-580" '^systemctl start nvidia-fabricmanager'
  [ -f "$STUB_STATE/active-nvidia-fabricmanager.service" ]
  assert_output_contains "changed: installed Fabric Manager and NSCQ 580.95.05, the driver's version" \
    "changed: started nvidia-fabricmanager.service"
  refute_gpu_detached
  assert_idempotent install-nvidia.sh
  assert_output_contains "Fabric Manager and NSCQ 580.95.05 are already installed (the driver's version)" \
    "nvidia-fabricmanager.service is already running"
}

@test "install-nvidia: a PCIe-only host gets no Fabric Manager" {
  run_script install-nvidia.sh
  assert_success
  assert_output_contains "no NVSwitch on the PCI bus: no Fabric Manager needed"
  refute_called 'fabricmanager|nscq'
}

@test "install-nvidia: nvswitch true installs Fabric Manager even with no NVSwitch seen" {
  export NVSWITCH=true
  run_script install-nvidia.sh
  assert_success
  assert_output_contains "warning: nvswitch is true but no NVSwitch (NVIDIA, PCI class 0x068000) is on the PCI bus"
  assert_called "$FM_PIN\$"
}

@test "install-nvidia: nvswitch false never installs Fabric Manager, and warns on an HGX board" {
  add_nvswitches 6
  export NVSWITCH=false
  run_script install-nvidia.sh
  assert_success
  assert_output_contains "warning: 6 NVSwitch(es) on the PCI bus but nvswitch is false"
  refute_called 'fabricmanager|nscq'
}

@test "install-nvidia: a Fabric Manager of another version is replaced by the driver's and restarted" {
  add_nvswitches 6
  run_script install-nvidia.sh
  assert_success
  # An older Fabric Manager, held, running (say, installed by hand before the cluster).
  installed_package nvidia-fabricmanager-580 580.82.07-0ubuntu0.24.04.1
  reset_calls
  run_script install-nvidia.sh
  assert_success
  assert_called "^$APT install -y --allow-downgrades --allow-change-held-packages nvidia-fabricmanager-580=580\\.95\\.05-\\*\$"
  assert_called '^systemctl restart nvidia-fabricmanager\.service$'
  [ "$(<"$STUB_STATE/dpkg/nvidia-fabricmanager-580")" = 580.95.05-0ubuntu0.24.04.1 ]
  assert_output_contains "(was: nvidia-fabricmanager-580 580.82.07)" \
    "changed: restarted nvidia-fabricmanager.service for Fabric Manager 580.95.05"
  assert_idempotent install-nvidia.sh
}

@test "install-nvidia: no Fabric Manager of the driver's version fails naming it, starting nothing" {
  add_nvswitches 6
  export STUB_ARCHIVE_FABRIC_MANAGER_VERSION=580.82.07
  run_script install-nvidia.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: install-nvidia: could not install nvidia-fabricmanager-580=580.95.05-* libnvidia-nscq-580=580.95.05-*: Fabric Manager must be the driver's version 580.95.05"
  refute_called '^apt-mark hold nvidia-fabricmanager|^systemctl (enable|start) nvidia-fabricmanager'
}

@test "install-nvidia: with another driver still loaded Fabric Manager waits for the reboot" {
  add_nvswitches 6
  nvidia_driver_loaded 570.172.08
  run_script install-nvidia.sh
  assert_success
  assert_file /var/run/reboot-required '*** System restart required ***'
  assert_called "$FM_PIN\$"
  assert_called '^systemctl enable nvidia-fabricmanager\.service$'
  refute_called '^systemctl (start|restart) nvidia-fabricmanager'
  assert_output_contains "Fabric Manager 580.95.05 starts at the next boot, with the driver it matches (loaded now: 570.172.08)"
  refute_gpu_detached
}

@test "install-nvidia: a loaded driver not from Ubuntu's packages gets no guessed Fabric Manager" {
  add_nvswitches 6
  nvidia_driver_loaded 580.82.07
  run_script install-nvidia.sh
  assert_failure
  assert_output_contains "Fabric Manager must be the driver's version, but nvidia-kernel-common-580-server (Ubuntu's 580-server driver) is not installed"
  refute_called 'fabricmanager'
}

@test "install-nvidia: the image's Fabric Manager (INSTALL_DRIVER=false) is checked, enabled and started" {
  export INSTALL_DRIVER=false
  add_nvswitches 6
  nvidia_driver_loaded 580.105.08
  mkdir -p "$GPU_CLUSTER_ROOT/usr/lib/systemd/system"
  touch "$GPU_CLUSTER_ROOT/usr/lib/systemd/system/nvidia-fabricmanager.service"
  run_script install-nvidia.sh
  assert_success
  refute_called "^$APT install .*(fabricmanager|nscq)"
  assert_called '^systemctl enable nvidia-fabricmanager\.service$'
  assert_called '^systemctl start nvidia-fabricmanager\.service$'
  refute_gpu_detached
  assert_idempotent install-nvidia.sh
  assert_output_contains "unchanged: nvidia-fabricmanager.service is enabled and running"
}

@test "install-nvidia: an image without Fabric Manager on an NVSwitch host fails the step, naming it" {
  export INSTALL_DRIVER=false
  add_nvswitches 6
  nvidia_driver_loaded 580.105.08
  run_script install-nvidia.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: install-nvidia: this host needs Fabric Manager, but the image has none (nvidia-fabricmanager.service)"
}

@test "install-nvidia: a Fabric Manager that does not start fails the step" {
  export INSTALL_DRIVER=false
  add_nvswitches 6
  nvidia_driver_loaded 580.105.08
  mkdir -p "$GPU_CLUSTER_ROOT/lib/systemd/system"
  touch "$GPU_CLUSTER_ROOT/lib/systemd/system/nvidia-fabricmanager.service"
  # Say, a Fabric Manager of another version than the image's driver.
  installed_package nvidia-fabricmanager-580 580.95.05-1
  run_script install-nvidia.sh
  assert_failure
  assert_output_contains "Job for nvidia-fabricmanager.service failed"
}

@test "install-nvidia: NVSWITCH and INSTALL_DRIVER must be what the program passes" {
  export NVSWITCH=yes
  run_script install-nvidia.sh
  assert_failure
  assert_output_contains "NVSWITCH must be auto, true or false, got 'yes'"
  export NVSWITCH=auto INSTALL_DRIVER=maybe
  run_script install-nvidia.sh
  assert_failure
  assert_output_contains "expected \"true\" or \"false\": INSTALL_DRIVER='maybe'"
}
