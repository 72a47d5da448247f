"""The request router: ``HANDLERS`` maps each API key the broker answers to its handler.

The one module that imports every handler; the broker's dispatch reads the table. The
package ``tierlog.broker.handlers`` itself imports nothing, so importing one handler
module (or anything a handler imports) never pulls in the others.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from tierlog.broker.handlers.acls import (
    handle_create_acls,
    handle_delete_acls,
    handle_describe_acls,
)
from tierlog.broker.handlers.admin import (
    handle_alter_configs,
    handle_create_partitions,
    handle_create_topics,
    handle_delete_topics,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from tierlog.broker.handlers.cluster_info import (
    handle_describe_cluster,
    handle_describe_topic_partitions,
)
from tierlog.broker.handlers.config_resources import handle_list_config_resources
from tierlog.broker.handlers.consumer_groups import (
    handle_consumer_group_describe,
    handle_consumer_group_heartbeat,
)
from tierlog.broker.handlers.fetch import handle_fetch
from tierlog.broker.handlers.groups import (
    handle_delete_groups,
    handle_describe_groups,
    handle_find_coordinator,
    handle_heartbeat,
    handle_join_group,
    handle_leave_group,
    handle_list_groups,
    handle_offset_commit,
    handle_offset_delete,
    handle_offset_fetch,
    handle_sync_group,
    handle_txn_offset_commit,
)
from tierlog.broker.handlers.log_dirs import (
    handle_alter_replica_log_dirs,
    handle_describe_log_dirs,
)
from tierlog.broker.handlers.metadata import handle_api_versions, handle_metadata
from tierlog.broker.handlers.offsets import (
    handle_delete_records,
    handle_list_offsets,
    handle_offset_for_leader_epoch,
)
from tierlog.broker.handlers.produce import handle_produce
from tierlog.broker.handlers.quotas import (
    handle_alter_client_quotas,
    handle_describe_client_quotas,
)
from tierlog.broker.handlers.reassignment import (
    handle_alter_partition_reassignments,
    handle_elect_leaders,
    handle_list_partition_reassignments,
)
from tierlog.broker.handlers.replication import handle_alter_partition
from tierlog.broker.handlers.sasl import handle_sasl_authenticate, handle_sasl_handshake
from tierlog.broker.handlers.scram_credentials import (
    handle_alter_user_scram_credentials,
    handle_describe_user_scram_credentials,
)
from tierlog.broker.handlers.telemetry import (
    handle_get_telemetry_subscriptions,
    handle_push_telemetry,
)
from tierlog.broker.handlers.transactions import (
    handle_add_offsets_to_txn,
    handle_add_partitions_to_txn,
    handle_describe_producers,
    handle_describe_transactions,
    handle_end_txn,
    handle_init_producer_id,
    handle_list_transactions,
    handle_write_txn_markers,
)
from tierlog.protocol import ApiKey

if TYPE_CHECKING:
    from tierlog.broker.services import BrokerServices
    from tierlog.protocol import Request

HandlerFn = Callable[["BrokerServices", "Request"], Awaitable[Any]]

HANDLERS: dict[int, HandlerFn] = {
    ApiKey.PRODUCE: handle_produce,
    ApiKey.FETCH: handle_fetch,
    ApiKey.LIST_OFFSETS: handle_list_offsets,
    ApiKey.METADATA: handle_metadata,
    ApiKey.API_VERSIONS: handle_api_versions,
    ApiKey.CREATE_TOPICS: handle_create_topics,
    ApiKey.DELETE_TOPICS: handle_delete_topics,
    ApiKey.DELETE_RECORDS: handle_delete_records,
    ApiKey.INIT_PRODUCER_ID: handle_init_producer_id,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: handle_offset_for_leader_epoch,
    ApiKey.DESCRIBE_CONFIGS: handle_describe_configs,
    ApiKey.ALTER_CONFIGS: handle_alter_configs,
    ApiKey.CREATE_PARTITIONS: handle_create_partitions,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs,
    ApiKey.FIND_COORDINATOR: handle_find_coordinator,
    ApiKey.JOIN_GROUP: handle_join_group,
    ApiKey.SYNC_GROUP: handle_sync_group,
    ApiKey.HEARTBEAT: handle_heartbeat,
    ApiKey.LEAVE_GROUP: handle_leave_group,
    ApiKey.OFFSET_COMMIT: handle_offset_commit,
    ApiKey.OFFSET_FETCH: handle_offset_fetch,
    ApiKey.LIST_GROUPS: handle_list_groups,
    ApiKey.DESCRIBE_GROUPS: handle_describe_groups,
    ApiKey.DELETE_GROUPS: handle_delete_groups,
    ApiKey.OFFSET_DELETE: handle_offset_delete,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: handle_consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: handle_consumer_group_describe,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: handle_describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: handle_alter_client_quotas,
    ApiKey.ELECT_LEADERS: handle_elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: handle_alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: handle_list_partition_reassignments,
    ApiKey.ALTER_PARTITION: handle_alter_partition,
    ApiKey.DESCRIBE_LOG_DIRS: handle_describe_log_dirs,
    ApiKey.ALTER_REPLICA_LOG_DIRS: handle_alter_replica_log_dirs,
    ApiKey.DESCRIBE_CLUSTER: handle_describe_cluster,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: handle_describe_topic_partitions,
    ApiKey.SASL_HANDSHAKE: handle_sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: handle_sasl_authenticate,
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: handle_get_telemetry_subscriptions,
    ApiKey.PUSH_TELEMETRY: handle_push_telemetry,
    ApiKey.LIST_CONFIG_RESOURCES: handle_list_config_resources,
    ApiKey.ADD_PARTITIONS_TO_TXN: handle_add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: handle_add_offsets_to_txn,
    ApiKey.END_TXN: handle_end_txn,
    ApiKey.WRITE_TXN_MARKERS: handle_write_txn_markers,
    ApiKey.DESCRIBE_PRODUCERS: handle_describe_producers,
    ApiKey.DESCRIBE_TRANSACTIONS: handle_describe_transactions,
    ApiKey.LIST_TRANSACTIONS: handle_list_transactions,
    ApiKey.TXN_OFFSET_COMMIT: handle_txn_offset_commit,
    ApiKey.DESCRIBE_ACLS: handle_describe_acls,
    ApiKey.CREATE_ACLS: handle_create_acls,
    ApiKey.DELETE_ACLS: handle_delete_acls,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: handle_describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: handle_alter_user_scram_credentials,
}
