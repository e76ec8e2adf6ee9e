{ line = $0; sub(/^[ \t]+/, "", line) }
line ~ /^\[/ { section = line; gsub(/'/, "\"", section); next }
(section == "[plugins.\"io.containerd.cri.v1.images\"]" ||
 section == "[plugins.\"io.containerd.grpc.v1.cri\".containerd]") && line ~ /^snapshotter[ \t]*=/ {
  value = line; sub(/^snapshotter[ \t]*=[ \t]*/, "", value); gsub(/["']/, "", value); print value; exit
}
