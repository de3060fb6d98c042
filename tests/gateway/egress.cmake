# gateway_egress_test (unit): the credential and audit routes over real
# actors and an in-memory store, answered through a recording transport (no
# sockets), and their JSON.
airlock_test(gateway_egress_test
  SOURCES egress_routes_test.cpp
  DEPS airlock_gateway airlock_scheduler scheduler_test_support
  LABELS unit)
