# ruff: noqa
# The consumer of seed 004, as the seed shows it; the only change is the indentation, which
# the seed's text copy lost (restored). The bootstrap address 192.168.56.101:9092 is kept
# here; tests/compat/test_seed_004.py replaces that literal with the test broker's address
# when it runs the script, and stops the endless loop by ending the process once the message
# has been printed.
from confluent_kafka import Consumer
topic='jsontest'
consumer = Consumer({
    'bootstrap.servers': '192.168.56.101:9092',
    'group.id': 'mygroup',
    'auto.offset.reset': 'earliest'
})
consumer.subscribe([topic])
while True:
    msg = consumer.poll(1.0)
    if msg is None:
        continue
    if msg.error():
        print("Consumer error: {}".format(msg.error()))
        continue
    print('Received message: {}'.format(msg.value().decode('utf-8')))
consumer.close()
