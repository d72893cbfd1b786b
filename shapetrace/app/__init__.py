"""The use cases behind the commands: a traced session, compare, strides chains, tracing a script,
predict and classroom data. Plain data out; nothing here prints or imports Rich.
"""
