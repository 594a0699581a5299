"""Read-only representations of the capacity inventory and the cluster health."""

from __future__ import annotations

from rest_framework import serializers


class MigSerializer(serializers.Serializer):
    profile = serializers.CharField()
    allocatable = serializers.IntegerField()
    allocated = serializers.IntegerField()
    free = serializers.IntegerField()
    memory_mib = serializers.IntegerField(allow_null=True)


class ModelCapacitySerializer(serializers.Serializer):
    gpu_model = serializers.CharField()
    nodes = serializers.IntegerField()
    schedulable_nodes = serializers.IntegerField()
    cards = serializers.IntegerField()
    memory_mib = serializers.IntegerField()
    memory_allocated_mib = serializers.IntegerField()
    whole_allocatable = serializers.IntegerField()
    whole_allocated = serializers.IntegerField()
    whole_free_schedulable = serializers.IntegerField()
    mig = MigSerializer(many=True)
    shared_allocatable = serializers.IntegerField()
    shared_allocated = serializers.IntegerField()


class NodeCapacitySerializer(serializers.Serializer):
    name = serializers.CharField()
    gpu_model = serializers.CharField()
    zone = serializers.CharField()
    rack = serializers.CharField()
    switch = serializers.CharField()
    schedulable = serializers.BooleanField()
    ready = serializers.BooleanField()
    unschedulable = serializers.BooleanField()
    cards = serializers.IntegerField()
    card_memory_mib = serializers.IntegerField(allow_null=True)
    memory_mib = serializers.IntegerField()
    memory_allocated_mib = serializers.IntegerField()
    whole_allocatable = serializers.IntegerField()
    whole_allocated = serializers.IntegerField()
    mig = MigSerializer(many=True)
    shared_allocatable = serializers.IntegerField()
    shared_allocated = serializers.IntegerField()
    sharing_strategy = serializers.CharField()
    share_memory_mib = serializers.IntegerField(allow_null=True)
    topology = serializers.ListField(
        child=serializers.CharField(allow_blank=True),
        help_text="the node's value of each topology level (see topology_levels)")


class CapacitySerializer(serializers.Serializer):
    observed_at = serializers.DateTimeField(allow_null=True)
    totals = serializers.DictField(child=serializers.IntegerField())
    resources = serializers.DictField(
        child=serializers.DecimalField(max_digits=20, decimal_places=3, coerce_to_string=True,
                                       normalize_output=True),
        help_text="capacity per quota resource key: allocatable on every observed node, "
                  "cordoned ones included (k8s_sync.selectors.resource_capacity)")
    models = ModelCapacitySerializer(many=True)
    nodes = NodeCapacitySerializer(many=True)
    topology_levels = serializers.ListField(
        child=serializers.CharField(),
        help_text="node-label keys of the topology in force, widest first; a node's switch "
                  "is its value of the last")


class ObserverSerializer(serializers.Serializer):
    kind = serializers.CharField()
    resource_version = serializers.CharField()
    last_list_at = serializers.DateTimeField(allow_null=True)
    last_event_at = serializers.DateTimeField(allow_null=True)
    last_error = serializers.CharField()
    last_error_at = serializers.DateTimeField(allow_null=True)
    failing = serializers.BooleanField()
    objects = serializers.IntegerField()


class HealthSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    reachable = serializers.BooleanField()
    error = serializers.CharField()
    version = serializers.CharField()
    training_operator = serializers.BooleanField(allow_null=True)
    checked_at = serializers.DateTimeField()
    kinds = ObserverSerializer(many=True)
    counts = serializers.DictField(child=serializers.IntegerField())
