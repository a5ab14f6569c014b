#!/bin/bash
# Starts the compose broker secured like `rewardstream kafka start --secure`: SASL/SCRAM for
# clients, PLAIN for the controller listener, StandardAuthorizer with nothing allowed that no ACL
# allows, admin the one super user. admin's SCRAM credentials are written when the storage is
# formatted (KIP-900); the services' users and ACLs are made by the kafka-principals service.
set -euo pipefail
umask 077
kafka_home=${KAFKA_HOME:-/opt/kafka}
infra=${REWARDSTREAM_INFRA:-/opt/rewardstream/infra}
base=${KAFKA_BASE_CONFIG:-$infra/compose/kafka.properties}
work=${KAFKA_WORK_DIR:-/tmp/rewardstream-kafka}
password=$(tr -d '\n' < "${KAFKA_ADMIN_PASSWORD_FILE:-/run/secrets/kafka.password}")
case "$password" in
  ""|*[!A-Za-z0-9_-]*) echo "the admin password must be non-empty URL-safe base64 (A-Z a-z 0-9 _ -)" >&2
                       exit 2 ;;
esac
mkdir -p "$work"
config=$work/server.properties
# This node's place in the cluster (one node unless infra/compose-cluster.env says three).
node_id=${KAFKA_NODE_ID:-1}
host=${KAFKA_ADVERTISED_HOST:-kafka}
voters=${KAFKA_QUORUM_VOTERS:-1@kafka:9093}
replication=${KAFKA_REPLICATION:-1}
min_isr=${KAFKA_MIN_ISR:-1}
{ sed -e "s/{node_id}/$node_id/g" -e "s/{host}/$host/g" -e "s/{voters}/$voters/g" \
      -e "s/{replication}/$replication/g" -e "s/{min_isr}/$min_isr/g" "$base"
  echo
  sed "s/{admin_password}/$password/g" "$infra/server-secure.properties"; } > "$config"
# The healthcheck's client (kafka-broker-api-versions.sh --command-config).
cat > "$work/admin-client.properties" <<PROPERTIES
security.protocol=SASL_PLAINTEXT
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$password";
PROPERTIES
log_dir=$(sed -n 's/^log.dirs=//p' "$config")
if [ ! -f "$log_dir/meta.properties" ]; then
  # Arguments from a file (the storage tool reads @files), so the password is not in argv.
  printf '%s\n' format -t "${CLUSTER_ID:?set CLUSTER_ID}" -c "$config" \
    --add-scram "SCRAM-SHA-256=[name=admin,password=$password]" \
    --add-scram "SCRAM-SHA-512=[name=admin,password=$password]" > "$work/format.args"
  "$kafka_home/bin/kafka-storage.sh" "@$work/format.args"
  rm -f "$work/format.args"
fi
exec "$kafka_home/bin/kafka-server-start.sh" "$config"
