# ruff: noqa
# The producer of seed 004, as the seed shows it, with two changes only: the seed's first line
# has a typo ("rom confluent_kafka import Producer", fixed to "from ..."), and the seed's text
# copy lost the indentation (restored). The bootstrap address 192.168.56.101:9092 is kept
# here; tests/compat/test_seed_004.py replaces that literal with the test broker's address
# when it runs the script.
from confluent_kafka import Producer
def delivery_report(err, msg):
    """ Called once for each message produced to indicate delivery result.
    Triggered by poll() or flush(). """
    if err is not None:
        print('Message delivery failed: {}'.format(err))
    else:
        print('Message delivered to {} [{}]'.format(msg.topic(), msg.partition()))
topic='jsontest'
producer = Producer({'bootstrap.servers': '192.168.56.101:9092'})
data='''
{"foo":"bar"}
'''
producer.poll(0)
# Asynchronously produce a message, the delivery report callback
# will be triggered from poll() above, or flush() below, when the message has
# been successfully delivered or failed permanently.
producer.produce('topic', data.encode('utf-8'), callback=delivery_report)
# Wait for any outstanding messages to be delivered and delivery report
# callbacks to be triggered.
producer.flush()
