# gateway_api_unit_test (unit): the API's JSON shapes and validation, and the
# OpenAPI document covering every route the listeners register.
airlock_test(gateway_api_unit_test
  SOURCES api_json_test.cpp openapi_test.cpp
  DEPS airlock_gateway
  LABELS unit)
