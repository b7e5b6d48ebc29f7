# Shared by the postprovision hooks (sourced, not run): messages, and azd values.
log() { printf '[postprovision] %s\n' "$*"; }
die() { printf '[postprovision] ERROR: %s\n' "$*" >&2; exit 1; }

# azd exports its environment values to hooks; when run by hand, ask azd for the missing ones.
env_value() {
  local name="$1" value="${!1:-}"
  if [ -z "$value" ] && command -v azd >/dev/null 2>&1; then
    value="$(azd env get-value "$name" 2>/dev/null || true)"
  fi
  [ -n "$value" ] || die "$name is not set; run 'azd provision' first"
  printf '%s' "$value"
}

# This machine's public IPv4 address for a temporary firewall rule (SQL_CLIENT_IP overrides detection).
client_ip() {
  local ip="${SQL_CLIENT_IP:-}"
  [ -n "$ip" ] || ip="$(curl -fsS --max-time 10 https://api.ipify.org || true)"
  [[ "$ip" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || die "could not detect your public IPv4 address; set SQL_CLIENT_IP=<ip> and retry"
  printf '%s' "$ip"
}
