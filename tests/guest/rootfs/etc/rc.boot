#!/bin/sh
# /etc/rc.boot: the test guest's whole boot sequence (busybox init sysinit).
# Built into the initramfs by tests/guest/build. Serial-console protocol
# (/dev/ttyS0), one line each, in this order:
#   GUEST-USERDATA-DONE exit=<n>     only when the seed (NoCloud or config
#                                    drive) has #! user-data
#   GUEST-DHCP / GUEST-DHCP6 ...      one per lease (udhcpc / dhcpcd hooks)
#   GUEST-READY hostname=<h> ip=<ip|none> ip6=<ip|none> uptime=<s>
#                                    (ip6: the DHCPv6 lease if it came already)
#                                    boot done; qemu-ga (if the port exists)
#                                    holds its virtio port open
#   GUEST-SHUTDOWN                   from /etc/rc.shutdown, on any power-off
#   GUEST-CPU-ONLINE cpu<N>          any time: a hot-added CPU was onlined
#   GUEST-NIC-ADDED ethN mac=<m> / GUEST-NIC-REMOVED ethN
#                                    any time: a hot-plugged NIC (then its
#                                    GUEST-DHCP line) or one unplugged
# Other output: "[guest <uptime>] ..." diagnostics, the user-data's own output,
# "Please press Enter to activate this console." (the askfirst shell, see
# /etc/inittab) and kernel messages. The tty turns each \n into \r\n.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev # Debian kernels do not auto-mount it
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=0755,nosuid,nodev run /run
mount -t tmpfs -o mode=1777,nosuid,nodev tmp /tmp
mkdir -p /run/cidata /var/log

# first word of /proc/uptime
uptime_s() { read -r up _ </proc/uptime; echo "$up"; }
log() { echo "[guest $(uptime_s)] $*" >/dev/ttyS0; }

# ---- kernel modules (list in /etc/modules, written by the build). One
# modprobe for all: an exec costs under TCG. The kernel command line has
# scsi_mod.scan=sync, so disks and cdroms behind virtio-scsi exist as soon
# as modprobe returns.
t_init=$(uptime_s)
# Memory hot-plug (virtio-mem, loaded below): what udev's rule does
# (SUBSYSTEM=="memory", ACTION=="add" -> online): the kernel onlines each
# memory block as it is added, movable so that it can be unplugged again.
[ -w /sys/devices/system/memory/auto_online_blocks ] &&
    echo online_movable >/sys/devices/system/memory/auto_online_blocks
# shellcheck disable=SC2046
if ! modprobe -a $(cat /etc/modules) 2>/dev/null; then
    for m in $(cat /etc/modules); do
        modprobe "$m" || log "modprobe $m failed"
    done
fi
t_mod=$(uptime_s)

# ---- ACPI power button -> /etc/acpi/PWRF/00000080 -> poweroff
# acpid opens the /dev/input/event* that exist now: button + evdev are loaded.
acpid -c /etc/acpi -l /var/log/acpid.log -p /run/acpid.pid

hostname -F /etc/hostname
# ---- the unprivileged user "guest" (uid 1000, /etc/passwd): its home, where
# qemu-ga's guest-ssh-add-authorized-keys writes ~/.ssh/authorized_keys;
# /etc/shadow is root's alone (qemu-ga's guest-set-user-password runs
# /usr/sbin/chpasswd on it)
chmod 0600 /etc/shadow
mkdir -p /home/guest && chown 1000:1000 /home/guest && chmod 0755 /home/guest
ip link set lo up

# ---- /dev/virtio-ports/<name> links (there is no udev)
mkdir -p /dev/virtio-ports
for p in /sys/class/virtio-ports/*; do
    [ -r "$p/name" ] || continue
    name=$(cat "$p/name")
    [ -n "$name" ] && ln -sf "../${p##*/}" "/dev/virtio-ports/$name"
done

# ---- qemu-ga, restarted if it ever exits (started early: it loads slowly)
qga_port=/dev/virtio-ports/org.qemu.guest_agent.0
if [ -e "$qga_port" ]; then
    (
        trap 'kill $(cat /run/qemu-ga.pid) 2>/dev/null; exit 0' TERM
        while :; do
            qemu-ga -m virtio-serial -p "$qga_port" -l /var/log/qemu-ga.log -t /run &
            echo $! >/run/qemu-ga.pid
            wait $!
            log "qemu-ga exited with $?, restarting"
            sleep 1
        done
    ) </dev/null >/dev/null 2>&1 &
    echo $! >/run/qemu-ga.loop.pid
else
    log "no org.qemu.guest_agent.0 port; qemu-ga not started"
fi

# ---- CPU hot-plug: what udev's rule does (SUBSYSTEM=="cpu", ACTION=="add"
# -> online=1; this kernel has no uevent helper): every second, a CPU that
# appeared since (hot-added, offline) is onlined, with a line
# "GUEST-CPU-ONLINE cpu<N>". Only new ones: a CPU the kernel offlines to
# eject it (ACPI unplug) is left alone.
(
    cd /sys/devices/system/cpu || exit 0
    known=" $(echo cpu[0-9]*) "
    while :; do
        now=" "
        for c in cpu[0-9]*; do
            now="$now$c "
            case $known in *" $c "*) continue ;; esac
            [ -w "$c/online" ] && echo 1 >"$c/online" &&
                echo "GUEST-CPU-ONLINE $c" >/dev/ttyS0
        done
        known=$now
        sleep 1
    done
) </dev/null >/dev/null 2>&1 &

# ---- cloud-init seed: NoCloud (an iso9660 or vfat volume labelled
# cidata/CIDATA: meta-data, user-data, network-config at its root) or an
# OpenStack config drive (labelled config-2: openstack/latest/meta_data.json,
# user_data, network_data.json). Either is copied to /run/cidata/ under the
# NoCloud names, plus "source" (nocloud|configdrive).
find_label() { findfs "LABEL=$1" 2>/dev/null || findfs "LABEL=$2" 2>/dev/null; }
# SCSI disks/cdroms (type 0/5) not yet bound to sd/sr: their block devices
# are still to come (scan=sync makes this rare; 2 s at most)
scsi_pending() {
    for d in /sys/bus/scsi/devices/*:*:*:*; do
        [ -r "$d/type" ] || continue
        case $(cat "$d/type") in 0 | 5) [ -d "$d/block" ] || return 0 ;; esac
    done
    return 1
}
i=0
while scsi_pending && [ $i -lt 20 ]; do sleep 0.1; i=$((i + 1)); done
[ $i -eq 0 ] || log "waited $i x 0.1 s for SCSI disks/cdroms"
yaml_value() { # KEY FILE: value of KEY in YAML or one-line JSON meta-data
    grep -o "\"\{0,1\}$1\"\{0,1\}[[:space:]]*:[[:space:]]*[^,}#]*" "$2" | head -n 1 |
        sed 's/^[^:]*:[[:space:]]*//' | tr -d "\"'\r "
}
mount_seed() { # DEVICE
    mount -o ro -t iso9660 "$1" /mnt 2>/dev/null || mount -o ro -t vfat "$1" /mnt 2>/dev/null
}
md=/run/cidata/meta-data
if seed=$(find_label cidata CIDATA) && [ -n "$seed" ]; then
    if mount_seed "$seed"; then
        for f in meta-data user-data network-config vendor-data; do
            [ -f "/mnt/$f" ] && cp "/mnt/$f" "/run/cidata/$f"
        done
        umount /mnt
        echo nocloud >/run/cidata/source
        log "cidata seed on $seed"
    else
        log "cidata seed on $seed could not be mounted"
    fi
elif seed=$(find_label config-2 CONFIG-2) && [ -n "$seed" ]; then
    if mount_seed "$seed"; then
        d=/mnt/openstack/latest
        [ -f "$d/meta_data.json" ] && cp "$d/meta_data.json" /run/cidata/meta_data.json
        [ -f "$d/user_data" ] && cp "$d/user_data" /run/cidata/user-data
        [ -f "$d/network_data.json" ] && cp "$d/network_data.json" /run/cidata/network-config
        umount /mnt
        echo configdrive >/run/cidata/source
        log "config-2 seed on $seed"
        # OpenStack meta-data names: hostname, uuid
        if [ -f /run/cidata/meta_data.json ]; then
            h=$(yaml_value hostname /run/cidata/meta_data.json)
            u=$(yaml_value uuid /run/cidata/meta_data.json)
            printf 'instance-id: %s\nlocal-hostname: %s\n' "$u" "$h" >"$md"
        fi
    else
        log "config-2 seed on $seed could not be mounted"
    fi
else
    log "no cidata or config-2 seed"
fi
if [ -f "$md" ]; then
    iid=$(yaml_value instance-id "$md")
    [ -n "$iid" ] && echo "$iid" >/run/instance-id
    h=$(yaml_value local-hostname "$md")
    if [ -n "$h" ]; then
        hostname "$h"
        echo "$h" >/etc/hostname
        printf '127.0.1.1\t%s\n' "$h" >>/etc/hosts
    fi
fi

# ---- network: DHCP on every ethN; udhcpc backgrounds itself (-b) and renews
for n in /sys/class/net/eth*; do
    [ -e "$n" ] || continue
    ifc=${n##*/}
    udhcpc -i "$ifc" -s /usr/share/udhcpc/default.script -p "/run/udhcpc.$ifc.pid" \
        -t 8 -T 1 -A 3 -b -S -x "hostname:$(hostname)" >/dev/null 2>&1 &
done
# DHCPv6 on eth0: dhcpcd (Debian's busybox has no udhcpc6), see
# /etc/dhcpcd6.conf; its hook writes /run/ip6.eth0 and a GUEST-DHCP6 marker.
if [ -e /sys/class/net/eth0 ] && command -v dhcpcd >/dev/null; then
    mkdir -p /var/lib/dhcpcd /run/dhcpcd
    dhcpcd -6 -b -f /etc/dhcpcd6.conf -c /usr/share/dhcpcd/hook eth0 >/dev/null 2>&1
fi
if [ -e /sys/class/net/eth0 ]; then
    # wait up to 5 s in all for the first lease of every ethN (a second NIC,
    # e.g. a bridge-bound Multus network, has its own DHCP server)
    i=0
    for n in /sys/class/net/eth*; do
        while [ ! -s "/run/ip.${n##*/}" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    done
    # No wait for DHCPv6: many networks have none (QEMU's user network,
    # the bridge binding); its lease comes with a GUEST-DHCP6 marker.
fi
# ---- NIC hot-plug: what udev's rule and a network manager would do
# (SUBSYSTEM=="net", ACTION=="add" -> DHCP): every second, an ethN that
# appeared since boot gets udhcpc, with a line "GUEST-NIC-ADDED ethN
# mac=<mac>"; one that went away, "GUEST-NIC-REMOVED ethN" (its udhcpc
# exits with the link).
(
    known=" $(cd /sys/class/net && echo eth*) "
    while :; do
        now=" "
        for n in /sys/class/net/eth*; do
            [ -e "$n" ] || continue
            ifc=${n##*/}
            now="$now$ifc "
            case $known in *" $ifc "*) continue ;; esac
            echo "GUEST-NIC-ADDED $ifc mac=$(cat "$n/address")" >/dev/ttyS0
            udhcpc -i "$ifc" -s /usr/share/udhcpc/default.script -p "/run/udhcpc.$ifc.pid" \
                -t 8 -T 1 -A 3 -b -S -x "hostname:$(hostname)" >/dev/null 2>&1 &
        done
        for ifc in $known; do
            case $now in *" $ifc "*) continue ;; esac
            echo "GUEST-NIC-REMOVED $ifc" >/dev/ttyS0
            kill "$(cat "/run/udhcpc.$ifc.pid" 2>/dev/null)" 2>/dev/null
            rm -f "/run/udhcpc.$ifc.pid" "/run/ip.$ifc"
        done
        known=$now
        sleep 1
    done
) </dev/null >/dev/null 2>&1 &
# A TCP service for the network e2e tests (masquerade `ports` forwarding):
# GET / on ports 8080 and 80 answers GUEST-HTTP.
if [ -s /run/ip.eth0 ]; then
    mkdir -p /run/www && echo "GUEST-HTTP $(hostname)" >/run/www/index.html
    httpd -p 8080 -h /run/www
    httpd -p 80 -h /run/www
fi

# ---- user-data: a #! script runs now, before GUEST-READY. Its output goes to
# /var/log/user-data.log, which is then copied to the serial console (a file,
# not a pipe, so a background job left running by the script cannot stall the
# boot; a script wanting live output can write to /dev/ttyS0 itself).
ud=/run/cidata/user-data
if [ -f "$ud" ] && [ "$(head -c 2 "$ud")" = "#!" ]; then
    chmod 0755 "$ud"
    log "running user-data"
    (cd /root && exec "$ud") </dev/null >/var/log/user-data.log 2>&1
    rc=$?
    cat /var/log/user-data.log >/dev/ttyS0
    # the marker must start a line, whatever the script printed last
    [ -n "$(tail -c 1 /var/log/user-data.log)" ] && echo >/dev/ttyS0
    echo "GUEST-USERDATA-DONE exit=$rc" >/dev/ttyS0
elif [ -f "$ud" ]; then
    log "user-data is not a #! script; ignored ($(head -n 1 "$ud"))"
fi

t_net=$(uptime_s)

# ---- wait (up to 10 s) until qemu-ga holds its port open: only then does
# the host see the agent as connected.
if [ -e "$qga_port" ]; then
    qga_open() {
        pid=$(cat /run/qemu-ga.pid 2>/dev/null) && [ -n "$pid" ] || return 1
        for fd in /proc/"$pid"/fd/*; do
            case $(readlink "$fd" 2>/dev/null) in /dev/vport*) return 0 ;; esac
        done
        return 1
    }
    i=0
    while [ $i -lt 100 ] && ! qga_open; do sleep 0.1; i=$((i + 1)); done
    [ $i -lt 100 ] || log "qemu-ga did not open $qga_port"
fi

t_qga=$(uptime_s)
log "boot: init at $t_init s, modules loaded $t_mod s, seed+network+user-data done $t_net s, agent ready $t_qga s"
ip=$(cat /run/ip.eth0 2>/dev/null)
ip6=$(cat /run/ip6.eth0 2>/dev/null)
echo "GUEST-READY hostname=$(hostname) ip=${ip:-none} ip6=${ip6:-none} uptime=$(uptime_s)" >/dev/ttyS0
: >/run/guest-ready
