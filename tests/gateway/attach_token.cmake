# Data-plane tokens (gateway/attach_token): signing, verification, the key file.
airlock_test(attach_token_tests
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/attach_token_test.cpp
  DEPS airlock_gateway
  LABELS unit)
